// Package queue is walq's public API: a durable ack queue in a directory,
// safe for any number of producers and competing consumers in one process.
//
//	q, err := queue.Open("/var/lib/app/jobs", &queue.Options{AckTimeout: 30 * time.Second})
//	if err != nil { ... }
//	defer q.Close()
//	id, err := q.Enqueue(ctx, payload)  // durable when it returns (SyncAlways)
//	m, err := q.Dequeue(ctx)            // blocks until a message is ready
//	... process m.Payload ...
//	err = m.Ack()                       // or m.Nack(delay), m.Extend(d), m.DeadLetter(why)
//
// Every call returns an error to check; the sketch above leaves them out.
//
// # Delivery
//
// A dequeued message is leased to its consumer for AckTimeout, counted from
// the delivery (not from the enqueue). Until it is acked, nacked,
// dead-lettered or the lease runs out, no other consumer gets it. Each
// delivery has its own Receipt; an ack, nack or extend with the receipt of
// a lease that ran out fails with ErrLeaseLost, so a slow consumer cannot
// ack a message that another consumer now owns. The deadline is judged by
// the queue's clock when the call is made, whether or not the message has
// been requeued yet; the refusal does not requeue it: the housekeeper does,
// once it has written the record that ends the lease (as durable as the
// sync mode promises), so a TryDequeue made right after an ErrLeaseLost
// may find nothing for a moment (with ManualRequeue, until
// RequeueExpired); a settle that was written stands when the log is
// replayed, whatever the clock says then. A lease that runs out
// makes the message ready again; the delivery count is kept, and after
// MaxDeliveries the message goes to the dead-letter set instead, where it
// can be listed, requeued or purged. The queue applies its own limit
// again whenever it would deliver: a ready message that already had
// MaxDeliveries (left ready by an open with a higher limit or none, as
// walq's writing commands open a queue) is dead-lettered there, with the
// reason "N deliveries, limit M; not delivered again", and the next one
// is delivered. Sorted and windowed queues do the same for each value of
// a key that a pull would take: the values past the limit go to the dead
// set, and the key's others are pulled.
//
// With the default Options.Clock the queue reads the system's wall clock
// as a base plus the monotonic time since, and reads the base again every
// millisecond: a step of the wall clock (set by hand, by NTP, or a resume
// from suspend) shows in deadlines and delays at most a millisecond late
// for calls made after it. What sleeps until a time (a blocked Dequeue
// until a delay ends, a blocked Pull until a window closes, the
// housekeeper until a lease deadline) sleeps on the monotonic clock, which
// a step does not move, and reads the clock again at least every second:
// after a forward step it releases what came due at most a second late
// (not up to the whole delay, window or AckTimeout late). The same holds
// for an Options.Clock whose Now steps while its After timers do not.
// A message's delay (WithDelay, WithDeliverAt, a nack's delay) is judged
// by the clock at each dequeue, Stats, Browse and Peek: after a step back,
// a message whose delay had passed and that was not delivered since is
// held again until its time comes by the new clock, in the live queue and
// after a crash alike. A sorted batch's nack delay is judged by the clock
// at each pull (and Stats) until its key is pulled again or has no value
// left: after a step back, a key whose delay had passed and that was not
// pulled since is held again until its time comes by the new clock, in
// the live queue and after a crash alike. Delays and their ends before
// 1970, or at the unix epoch exactly, hold back as any other. A windowed
// key is due once the clock reaches Window past the PublishedAt of its
// oldest pending value, judged at each pull: after a step back, a key
// whose window had closed and that was not pulled since is held again
// until it closes by the new clock, and a value published after the step
// carries the earlier time, so it comes before the values published
// before the step, in its batch and in its key's place. A lease's
// deadline (AckTimeout from the delivery or pull, or an Extend from the
// call) is a time of the clock as well: a step back lengthens every
// running lease, of a message or a batch, by the step, and a step forward
// shortens it by the step, in the live queue and after a clean reopen
// alike (a crash ends the leases, whatever the clock).
//
// Delivery is at least once: a message is delivered again only if its
// consumer did not ack it in time, nacked it, or died. An enqueue with a
// producer-given id (WithID) that is already live, or was acked within
// DedupWindow, fails with ErrDuplicate, so a producer that retries after
// an error enqueues once. ErrDuplicate is said only once the enqueue
// that holds the id is as durable as the sync mode promises: while it is
// in flight (an EnqueueAsync whose Pending has not completed, an Enqueue
// of another goroutine), the second one waits for its outcome, and then
// fails with ErrDuplicate, or with the error that poisoned the log when
// it failed; the wait makes no fsync of its own, and ends with the
// second one's context (its error, nothing enqueued).
// The window is the open's own: an open with a shorter one forgets the
// ids whose window has passed (an id acked exactly DedupWindow ago is
// still within it), and an open without one
// forgets every acked id as it opens and each id as it is acked. What an
// open forgot is kept by its next snapshot (Close or compaction), which
// leaves out every id whose window has passed as it is taken, whether or
// not an enqueue looked since: a later open with a longer window does not
// bring it back.
// After a crash the next open rebuilds the ids from the newest snapshot
// and the log after it, and applies its own window from each ack's time,
// so it refuses an id acked within its window that the crashed open had
// forgotten since that snapshot: a crash errs toward refusing a retry.
//
// # Order
//
// Messages that are ready again (nacked, lease ran out, left leased by a
// crashed process) and delayed messages whose time has come are delivered
// first, lowest sequence (oldest enqueue) first. Then never-delivered
// messages are delivered in enqueue order. With one consumer and no
// redeliveries the queue is strictly FIFO. A never-delivered message that
// compaction copied forward keeps its place among the never-delivered
// ones, across restarts.
//
// # Durability
//
// Every change (enqueue, lease, ack, nack, extend, expiry, dead-letter) is
// a record in a write-ahead log (package wal) before the call returns.
// Concurrent calls share commits: one write and one fsync cover every
// record gathered while the previous fsync ran, so acks and leases cost
// no fsync of their own. Dequeue and Pull return once their lease is
// written, without waiting for its fsync: a crash of the process keeps it,
// and under SyncAlways the ack that follows waits for the fsync that
// covers both; a power loss before that fsync takes the delivery back,
// uncounted (see Dequeue).
//
//   - SyncAlways (default): a call returns after the fsync that covers its
//     record. Nothing that returned success is lost by a crash or a power
//     loss.
//   - SyncInterval: a call returns after the write; the fsync that covers
//     its record starts at most SyncInterval after the write (later while
//     an earlier fsync runs), shared with the other writes of that time
//     rather than one per write. A process crash
//     loses nothing that returned; a power loss may lose the last
//     interval.
//   - SyncNever: fsync only at segment roll-over, snapshots and Close. A
//     process crash loses nothing that returned; a power loss may lose
//     everything since the last of those.
//
// A call checks its context before it writes anything (Dequeue and Pull
// also while they wait for a message, an enqueue while it waits for the
// one holding its producer-given id), but not while it waits for the
// write and the fsync of a record it appended: the change is made
// whatever the caller does next, and an error then would report as failed
// an enqueue or ack that was made. Every record is checked against the
// state before it is appended: one that does not apply fails with
// ErrInvalidChange and nothing is written.
//
// A failed write or fsync of the log poisons the queue, whoever met it
// (any call, a compaction's flush or truncation of the log, the
// background fsync of SyncInterval). Every later call that writes fails
// with an error wrapping that one. A compaction that fails while it
// writes its snapshot file poisons nothing: Compact returns the error,
// the log and the previous snapshot are as they were, and a later
// compaction tries again. On every kind of
// queue alike:
//
//   - a delivery (Dequeue, TryDequeue, DequeueBatch, Pull, TryPull)
//     returns nothing and that error, never ErrEmpty and never a wait:
//     its lease record cannot be written, and an enqueue or publish whose
//     write failed can no longer be delivered;
//   - a consumer asleep in Dequeue, DequeueBatch or Pull when the log is
//     poisoned wakes at once and returns it;
//   - a settle (Ack, Nack, Extend, DeadLetter, Settle and its batch forms,
//     their forms by id, and a sorted Batch's) returns it before any
//     refusal of its own (ErrLeaseLost, ErrNotFound, an invalid
//     argument), whatever its receipts or ids: a refusal would read as if
//     the log were healthy. Only a closed queue answers ErrClosed first;
//   - an enqueue (Enqueue, EnqueueBatch, EnqueueAsync) with a
//     producer-given id that the queue holds returns it, not
//     ErrDuplicate: the id may be an enqueue whose write failed, which no
//     file holds, and a producer told ErrDuplicate would drop it;
//   - a change of the dead set (RequeueDead, PurgeDead, RequeueAllDead,
//     PurgeAllDead, and a sorted queue's RequeueDeadValue and
//     PurgeDeadValue too) returns it, never ErrNotFound and never (0,
//     nil): the state may count a requeue or purge whose write failed;
//   - RequeueExpired (of every kind of queue) returns it, never (0, nil);
//   - so do Compact, and a call given nothing to do (Settle, SettleAsync,
//     AckBatch, NackBatch or ExtendBatch with no receipt, EnqueueBatch
//     with no item), never nil; once closed they return ErrClosed;
//   - Close returns it too, once it has closed the log and released the
//     directory, which the next Open finds as a crash left it: at most a
//     torn tail, which Open cuts, nothing to salvage, the log as written
//     replayed;
//   - Stats counts the log as written, what a reopen replays (LastLSN
//     too): not an enqueue or publish whose write failed, though the
//     queue had taken it in; one whose write was made and whose fsync
//     failed, yes (a power loss may still take it). When the log cannot
//     be read back (a segment damaged since it was written, a read
//     error), Stats.CountsErr says why and the counts are the calls', the
//     failed ones included; a read that met damage is not tried again, a
//     read error up to three times in all, not at every call;
//   - Browse, Peek, DeadLetters, DeadValues and Keys show the same log as
//     written: not an enqueue (Peek of its sequence is ErrNotFound), ack,
//     dead-lettering, requeue, purge or publish whose write failed (when
//     the log cannot be read back, the calls' state, and a read of a
//     record whose write failed answers the log's error).
//
// Close and reopen to go on.
//
// A full disk is such a failure: the call whose record does not fit fails
// with an error wrapping ENOSPC (errors.Is(err, syscall.ENOSPC); EDQUOT
// for a quota), and the queue is poisoned as above. The queue cannot free
// space by itself: every delivery and every settle appends a record (about
// 160 bytes per message delivered and acked), and a compaction writes a
// snapshot before it removes the segments drained. A queue reopened on the
// still-full disk opens when it has nothing to write (after a crash it
// appends the records that end the leases the crash left, which need
// space too), but its deliveries and acks soon fail with ENOSPC again.
// After a crash on the full disk, Open opens or fails with an error
// wrapping ENOSPC; neither loses a message or brings back an acked one.
// The way out is to free space outside the queue, reopen, and drain with a Compact
// every few hundred acks so that the segments drained are removed; the log
// writes no zeros ahead of its tail that do not fit (it then appends
// alone), so the space freed is all for records. A compaction whose
// snapshot does not fit (its size grows with what is still live: a sorted
// queue's has an entry per pending value) fails with ENOSPC and poisons
// nothing; it fits once enough is drained.
//
// What a call checks before the queue's state
// it answers in every state: a DequeueBatch, Pull or TryPull of fewer
// than one message is ErrInvalidOptions, and a delivery, enqueue or
// publish whose context has ended returns the context's error.
//
// After a crash, Open repairs a torn log tail, replays the log after the
// newest snapshot, and makes every message that was leased ready again at
// once (its consumers died with the process), keeping its delivery count,
// so a message that crashes its consumer reaches the dead-letter set after
// MaxDeliveries crashes instead of crash-looping forever, also when an
// open without the limit (a walq writing command) ended the lease. After a clean
// Close, leases keep running until their deadline, so a receipt can be
// acked by the next process; so do they when that process crashed before
// anything it wrote reached the disk (a power loss), as the log then ends
// with the clean Close. A Close whose fsync of the clean shutdown failed
// (it returns the error) wrote the record all the same: an Open that reads
// it back keeps the leases running, one that finds it lost ends them at
// once (see Queue.Close). An Extend that returned under SyncAlways is in
// the log, and a crash after it ends the lease all the same: a crash
// never keeps a lease for its extended deadline. The procedure is package recovery's
// (recovery.Recover); the queue gives it its state and appends the
// records that end the leases.
//
// # Streaming and batches
//
// EnqueueAsync, SettleAsync and AckAsync return a *Pending instead of
// waiting: it completes when the call's records are as durable as the sync
// mode promises of a call that returned (SyncAlways: after the fsync that
// covers them), or with the error that poisoned the log, which fails every
// call in flight; a failed call's records may still have been written, even
// fsynced, and be read back after a restart (see Pending.Err). A Pending
// shares its log group's commit: it costs no goroutine. Options.MaxPending
// bounds the records in flight (a call blocks while the window is full; a
// SettleAsync of more settlements than the window waits until none is in
// flight); Flush waits for every call that returned its Pending before it
// (under SyncInterval and SyncNever it also reports a log poisoned before
// an fsync covered them: see Flush), and Close completes every Pending. An
// asynchronous ack or dead-letter takes the message out of the queue at
// once; if the process dies or the power fails before its Pending
// completes, recovery may undo it and the message is delivered again (at
// least once). Once it completed without error, a kill of the process never
// undoes it, and under SyncAlways neither does a power loss. A kill -9
// right after SettleAsync or AckAsync returns can undo it under every sync
// mode; under SyncInterval and SyncNever its record may stay in memory up
// to a millisecond after the call returned (another call's write, such as
// the next Dequeue's lease, usually takes it sooner), and the window
// lasts that long.
//
// Settle applies many acks, nacks, extends and dead-letters in one commit
// (AckBatch, NackBatch, ExtendBatch, and Ack, Nack, Extend on the Messages
// DequeueBatch returns). Each settlement is checked on its own: those whose
// lease is lost are refused and listed in a *BatchError, the others are
// applied.
//
// # Damage
//
// Open, Verify and Repair run the same checks: segment files that follow
// on from each other, a log that reaches at least the snapshot's LSN (a log
// that ends before it lost synced records: damage, never a torn tail) and
// reaches back to what the snapshot's messages need, and the checksum of
// every entry Open reads. Open reads the snapshot and the log above it;
// Verify and Repair read every byte, and check that the record of every
// indexed message and sorted value (pending, dead or leased) is its own,
// as a delivery does. An entry below the snapshot is checked
// when something reads it (a delivery: see the next paragraph); a message is never
// skipped or delivered from bad bytes. A compaction checks each record it
// would copy forward as a delivery does (its checksum, and that it is the
// record of the message or value the index names) and leaves a damaged
// one where it is, never copied with a fresh checksum; it copies nothing
// that lies above the lowest such record (that record holds the log from
// there anyway) and fails with ErrCorrupt (Compact returns it; in the
// background it is a failure in Stats and the log, retried with backoff),
// so damage in a dead letter or a far-delayed message is reported without
// waiting for a delivery; a delivery that reaches the record reports it
// too. A damaged entry after the cursor (a never-delivered message's) is
// met the same way: the compaction copies no message, indexed or not,
// whose record lies above it, copies what lies below it once, and fails
// with ErrCorrupt, so its retries copy nothing again. Stats, which reads
// the oldest never-delivered message's record for OldestEnqueuedAt,
// reports damage there (or a read error) in Stats.OldestErr, and the age
// of the other messages. Damage is ErrCorrupt naming the way
// out: Repair (walq repair),
// which backs the directory up and salvages it under the directory lock,
// or Options.Salvage; damage that a salvaging open (or Repair's) cannot
// pass names neither, but what to do about it (or a backup). A
// tidwall/wal END file in the log directory, which walq never writes, a
// START file without a valid entry, or a FRONT file that names no segment
// (walq's names the first segment its truncation keeps), whose truncation
// would remove acknowledged records, is refused by every
// open and by Repair (before its backup), and listed by Verify in
// Check.Foreign: move it out. A FRONT file of walq's own whose truncation
// would remove records the snapshot loaded needs (a marker from a later
// moment than the snapshot: a directory put back from copies made at
// different times) is refused by every open, a read-only one and a
// salvaging one (Salvage, and its read-only preview) included, changing
// nothing, with an error wrapping ErrLaterFront: moved out, every segment
// is kept. A salvage skips damaged entries; it destroys no intact one,
// and finishing the truncation would remove intact segments for good.
// Verify reports it in Check.Front with the open's advice, and Repair
// refuses it before its backup, as its salvage does; beside a damaged
// newest snapshot, they and a salvage compare it with what the salvage
// falls back to (the newest valid older snapshot, or the log alone), and
// an open refusing that snapshot names the marker first. A marker with no
// segment left before it removes nothing and is finished, unless the log
// lacks records the snapshot needs all the same: an open without Salvage
// then refuses it as a missing segment, before the marker is removed; a
// salvage finishes it and reports the records already gone
// (Recovery.LostBefore). A roll a crash tore on an entry boundary
// looks like missing segments to an open that does not know the writer's
// SegmentSize (a read-only or salvaging Open without it, Verify without
// VerifyOptions.SegmentSize, Repair without Options.SegmentSize): it
// returns ErrCorrupt wrapping wal.ErrSegmentSizeUnknown, which advises no
// repair (Repair refuses it, before its backup), and Check.SizeUnknown
// reports it; given the size, each tells the torn roll apart, as the
// application's Open does. A salvage
// drops what was lost, and an indexed
// message or sorted value whose record is another's (Recovery.Dropped;
// a leased value leaves its batch, whose other values stay leased to it
// with no delivery counted: the consumer's receipt settles them, and
// MaxDeliveries sends none of them to the dead set for it; after a
// crash the crashed lease ends first, as for every lease), and reports
// it; it
// never delivers a payload from bytes that failed their checksum or from
// another record, and recounts what is ready. The LSNs of the records a
// salvage cuts off the log's end go to new records, as after a power
// loss: a receipt of a delivery whose lease record was cut is refused
// (ErrLeaseLost; its delivery time is not the new delivery's). What
// the damage took is lost, settles included. A settle record that
// survived keeps its message settled when the lease record it names was
// lost. A salvage keeps:
//   - an ack or dead-letter of a redelivery: it applies to its message;
//   - an ack or dead-letter of a first delivery: the message leaves the
//     delivery order (acked) or goes to the dead set with its reason
//     (dead-lettered), and a later purge or requeue of it applies too;
//     the messages pending before and after it are delivered as they
//     would have been;
//   - a dead-letter at MaxDeliveries of a ready message that a delivery
//     would have taken (it names no lease): when the damage took every
//     lease and nack record of the message, the message goes to the dead
//     set with its reason all the same, as after a lost first delivery;
//   - a sorted or windowed batch's ack or dead-letter: it settles the
//     values its record names, and only those. Without SingleFlight, when
//     the pull of a batch was lost, the replayed pull of a later batch of
//     the same key takes that batch's values too: the later batch's
//     settle leaves them out, the lost batch's own ack or dead-letter,
//     before or after that settle, settles them, and when none survived
//     they are pending again, as the crash ended the lost batch's lease.
//
// A message whose first delivery's lease record was lost and that nothing
// settled is delivered again. What a salvage cannot keep:
//   - a settle whose own record was lost: the message is delivered again;
//   - a sorted batch's ack or dead-letter written before its record named
//     the values (older logs), or whose pull survived while the replayed
//     state holds its values in another batch (a return record was lost):
//     the values are delivered again;
//   - the delivery count, nack delay and MaxDeliveries of a delivery whose
//     lease or pull record was lost.
//
// A file walq did not write is refused, never changed. A read-only
// salvaging open (ReadOnly and Salvage) shows what a salvage would
// produce, the settles above included, and writes nothing. It skips the
// records that no longer apply as the salvage skips them (its
// Recovery.Skipped), so it opens where the salvage opens, and ends in
// memory the leases of a crashed process as the salvage ends them: their
// messages are ready again, or dead at MaxDeliveries (and a sorted
// batch's values back in place, or dead), in its Stats, Browse,
// DeadLetters and DeadValues alike, and Recovery.Requeued and DeadOnOpen
// count them. (A plain read-only open leaves every lease as the log
// has it.) A damaged
// newest snapshot it sets aside as the salvage does (Recovery.SnapshotLost)
// and rebuilds the state as the salvage does, from the newest older
// valid snapshot (Recovery.SnapshotLSN) or else from the log
// alone, and a log that ends before the
// snapshot's LSN (or the damaged one's) shows as the same loss in
// Recovery.Log. It reads each
// indexed message's record as the salvage does: its Recovery.Dropped
// lists the indexed messages the salvage drops (records lost, then
// records that are another's, each by Seq; a never-delivered message whose
// enqueue record was lost is not named, only its LSN is lost, while one a
// compaction copied forward is named when its copy was lost), those messages are
// gone from its counts, its
// Recovery.LostBefore says where a log that lost its front starts, and
// over a damaged log (damaged entries or a lost front) it counts the
// never-delivered messages again from the log, as the salvage does.
//
// A salvage writes a message dead-lettered through a lost lease as a
// record of its own kind (move-dead). Releases before it refuse that kind
// as ErrCorrupt rather than misread it as a ready message. So an older
// binary, until a compaction of this release has copied that dead letter
// forward as an ordinary move (or it was purged or requeued):
//   - fails a plain open that replays the record (no newer snapshot);
//   - skips it in a salvage or walq repair (Skipped): that dead letter is
//     lost, never delivered;
//   - lists it without payload in DeadLetters, as a corrupt record, and
//     fails a compaction that copies it.
//
// A sorted or windowed queue writes a pending value that MaxDeliveries
// keeps from a pull as a record of its own kind too (value-dead), which
// releases before it refuse as ErrCorrupt. So an older binary, until a
// compaction of this release has taken that record into a snapshot:
//   - fails a plain open that replays the record (no newer snapshot);
//   - skips it in a salvage or walq repair (Skipped): the value is
//     pending again, and a pull delivers the poison value once more.
//
// A salvage that drops a leased value whose record is another's writes
// the drop with the batch's lease, which releases before it refuse
// ("drop of unknown value": they drop only pending and dead values). So
// an older binary, until a compaction of this release has taken that
// record into a snapshot:
//   - fails a plain open that replays the record (no newer snapshot);
//   - skips it in a salvage or walq repair (Skipped): the value stays in
//     its batch, and once the lease ends a pull or Verify meets its
//     misplaced record again (ErrCorrupt), and walq repair drops it.
//
// Every other record is one that older releases read. A record of a kind
// or with a flag this release does not know is refused as ErrCorrupt,
// never misread.
//
// A delivery that cannot read a message's payload (ErrCorrupt, or another
// read error such as an I/O error) does not return it, and does not lose
// it: the error holds a *ReadError naming it (its id and the failed
// delivery's receipt; for a sorted batch its key, value seq and receipt). Dequeue and TryDequeue return just
// the error; DequeueBatch, Pull and TryPull return the messages they
// could read together with it: process them, then handle the error. The
// unreadable message stays leased until AckTimeout, comes back, and is
// dead-lettered at MaxDeliveries, unless the caller dead-letters it first
// with that receipt; DeadLetters lists it without payload, its reason ending
// "; corrupt record: " and the read error. (The Redis engine dead-letters
// such a message at once and returns the others with a nil error.) A
// message never delivered whose record the cursor cannot read is not
// named, as its id is in the bad bytes: every delivery that reaches it
// fails, after leasing what was ready before it, until the directory is
// repaired. One bad byte can take more than one message: the log finds an
// entry by walking the entry headers from the nearest index point before
// it, so the entries after a damaged one, up to the next index point of
// its segment, cannot be read either.
//
// A delivery names every message or batch it could not read: the error
// joins one *ReadError for each (errors.Join; errors.As finds the first,
// ReadErrors finds them all, however the caller wrapped the error). Each
// carries the failed delivery's fenced receipt: Queue.DeadLetter with a
// message's Delivery, or Sorted.DeadLetter with a batch's Receipt, sets
// it aside, and once that lease has ended (the message came back, and
// may have been delivered, and read, elsewhere after a transient read
// error) it fails with ErrLeaseLost and changes nothing. DeadLetterID
// with the ID is not fenced: it takes the message from whichever delivery
// holds it now. Sorted.DeadLetter dead-letters the key's whole batch,
// the readable values too. Sorted.DeadValues lists a damaged dead value
// as DeadLetters does, without payload. A requeue checks what it
// requeues first, as a delivery would read it (the log entry's CRC, the
// record it holds), without copying the payload: RequeueDead,
// Sorted.RequeueDead and RequeueDeadValue (and the CLI's and dashboard's
// requeue) refuse a dead letter or value damaged so, with an error naming
// it (ErrCorrupt), and RequeueAllDead requeues the others and reports the
// ones it left, in one error that names the first ten. Such a letter
// stays dead until it is purged or the directory is repaired (walq
// repair). A check that fails for another reason (an I/O error) fails the
// requeue with that error, ErrClosed once the queue is closed, and the
// letter stays dead. A letter purged or requeued while it is checked is
// treated as gone before the call: RequeueAllDead leaves it out, and the
// single requeues return ErrNotFound. A purge reads no payload.
//
// # Sorted and windowed queues
//
// OpenSorted opens a queue of values ordered by a sort key (any integer,
// float or string type, or time.Time) and grouped by a message key. A
// key's place is the smallest sort key among its pending values; Pull
// returns whole keys in that order, each with all its pending values, and
// leases each key's batch like a message: Ack removes it, Nack, an expired
// lease or a crash puts its values back at their own sort keys, and after
// MaxDeliveries they go to the dead set. OpenWindowed is the form whose
// sort key is the publish time: a key is due Window after its oldest
// pending value was published, and a blocking Pull sleeps exactly until
// the next key is due. Both run on the same log, snapshots and recovery as
// the ack queue. A batch's BatchReceipt lets another process ack, nack,
// extend or dead-letter it; the dead set is listed (DeadValues), requeued
// and purged as the ack queue's dead letters are. These calls are the
// DeadValueSet of the SortedQueue and WindowedQueue interfaces, which the
// Redis engine (redisq) offers too.
//
// A dead value is named by its Seq and its PublishedAt together. A power
// loss under SyncNever or SyncInterval can take a value's publish, and the
// next run gives its Seq to another publish; so a Seq read before the
// crash may name another value, and RequeueDead and PurgeDead, which take
// a Seq alone, would requeue or purge it. RequeueDeadValue and
// PurgeDeadValue take the DeadValue that DeadValues returned and refuse
// it (ErrNotFound) unless its Seq still holds the value published at its
// PublishedAt, to the nanosecond: the safe forms. Under the system clock
// (the default Options.Clock) the later publish is made at another
// nanosecond; a Clock that repeats the times of an earlier run (a fake
// clock started at a fixed time) can give both the same PublishedAt, and
// then the name is no safer than the Seq.
//
// # Identity and inspection
//
// A directory records what it holds (ack, sorted or windowed, and the sort
// key type) in a file written at creation; opening it as anything else
// fails with ErrWrongKind. Options.ReadOnly opens a queue for inspection
// without writing a byte, beside a process that has it open if need be;
// opened while none has, it holds the directory's lock shared until
// Close, and an Open for writing meanwhile fails with ErrLocked, or waits
// for the Close up to its Options.LockTimeout.
//
// # Memory and disk
//
// A message that was never delivered costs no memory: it is an enqueue
// record after the log cursor, and its payload is read back from the log
// when it is delivered. Memory grows with the messages delivered but not
// acked, delayed, dead or ready again (a small entry each, no payload),
// and with producer-given ids. Snapshots record that metadata; the log is
// truncated at segment boundaries once every message before a boundary is
// gone, and messages that would pin old segments (a sorted queue's values
// too, leased ones included) are copied forward, so
// the log stays within about twice the live bytes plus two segments;
// except that more than 16,384 never-delivered messages, or records of
// theirs holding more than 16 MiB, are not copied:
// the lease and ack records written behind them are freed as the cursor
// passes them, not before. The bound holds after each compaction, which
// runs in the background each time a segment's worth of records has been
// written; between two compactions the log can exceed it by about one
// more segment, and a compaction that copies messages forward holds the
// copies and the originals until it truncates.
//
// # Concurrency
//
// All methods are safe for concurrent use. One mutex guards the indexes;
// payload reads, fsync waits and snapshot encoding happen outside it. One
// piece of work runs under it once per Open: the first call that names a
// message by its id (AckID, NackID, ExtendID, DeadLetterID, RequeueDead,
// PurgeDead) builds the index of ids over the messages held (leased,
// delayed, dead), in time proportional to their number; the calls after
// it, and a queue never asked by id, pay nothing for it. A
// background goroutine ends expired leases (at the earliest deadline, not
// by polling) and compacts; Close stops it and waits for it. A directory is
// locked (flock, or LockFileEx on Windows) by the process that has it open:
// a second Open gets ErrLocked.
package queue
