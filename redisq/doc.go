// Package redisq runs walq's queues on Redis 7: the ack queue (Open, the
// method set of queue.AckQueue) and the sorted and windowed queues
// (OpenSorted, OpenWindowed: queue.SortedQueue, queue.WindowedQueue),
// with the same errors, messages, batches and receipts as the embedded
// queues, for services that outgrow one machine. Many processes on many
// hosts can share one queue. It is its own module so that users of the
// embedded queue never download a Redis client.
//
//	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379", MaxRetries: -1})
//	q, err := redisq.Open(ctx, rdb, "jobs", &redisq.Options{AckTimeout: 30 * time.Second})
//	defer q.Close()
//	id, err := q.Enqueue(ctx, payload)
//	m, err := q.Dequeue(ctx)
//	err = m.Ack()
//
// # How it maps onto Redis
//
// Every state change (enqueue, lease, ack, nack, extend, expiry, dead
// letter, requeue, purge) is one call of a Lua function, so it is atomic
// on the server, also across a crash of the server (a call's writes reach
// the AOF as one MULTI/EXEC, which loading reverts when torn). The
// functions of each kind of queue (ack, sorted) are one library (Redis
// Functions), loaded by Open into every master the client reaches and
// again by any call that finds a server without it (a restart without
// persistence, a new master); its name carries a digest of its code, so
// each version of this package runs its own. All keys of a
// queue share the hash tag {name}: one queue is one Redis Cluster slot.
//
// A server with ACLs must let the client's user run HELLO (the
// connection's handshake), FUNCTION LOAD and
// FUNCTION LIST, FCALL, SUBSCRIBE and PING; GET, HGET and HSETNX, which
// Open runs; CONFIG GET, unless Options.TrustServer is set; WAIT, with
// Options.Replicas; and every command the functions run, since Redis
// checks those too: DECR, GET, HDEL, HGET, HGETALL, HINCRBY, HMGET, HSET,
// INCR, INCRBY, PUBLISH, ZADD, ZCARD, ZCOUNT, ZMSCORE, ZPOPMIN, ZRANGE,
// ZRANGEBYLEX, ZRANGEBYSCORE, ZREM and ZSCORE, all on the queue's keys
// and channel. A cluster client also needs CLUSTER SLOTS (and READONLY
// to read from replicas), which go-redis sends. Redis checks a function's
// commands only as it runs them, and a refusal after the function's first
// write would leave a half-done change (a pop without its lease): so Open
// and OpenSorted run each command their functions run on each key they
// run it on, and on the channel, and refuse a user refused one
// (queue.ErrInvalidOptions, naming the command and the key). They run
// them in a function flagged no-writes, where the server checks a
// command against the ACL before it refuses a write: nothing is written,
// published or created, and no keyspace event is raised but keymiss
// (notify-keyspace-events m, which A leaves out), which its reads of
// absent keys raise as any read does. The server counts each write it
// refuses there, one per pair of a write command and a key (PUBLISH and
// the channel included), twenty or so per Open, as a rejected call of
// that command and an error reply (INFO commandstats rejected_calls,
// errorstats errorstat_ERR, total_error_replies): a monitor of those
// figures sees each Open. So Open judges
// the ACL as it stands for each pair of a command and a key: refusals by
// command, by key pattern (read-only and write-only patterns included)
// and by selector (a command granted on some of the queue's keys only is
// refused when the functions run it on another). The FCALL of a handle
// that may write names every key of the queue its function may touch
// (the functions that run for each message, dequeues lone or gathered,
// acks by receipt and enqueues of up to 128 messages with generated ids
// ready at once, name only those; the others name all), so a user refused one,
// for reading or writing, is refused before the function runs. Grant the queue's commands on all of
// its keys (walq:{NAME}*) and its channel: an ACL changed while handles
// are open is not checked again. The functions check a key for the
// wrong type (below) with these same reads, so their checks hold under
// any ACL that Open accepts; TYPE, of the keyspace
// category, is optional: where granted, an error the server raises
// itself names the key of the wrong type, else it comes as it is. A
// ReadOnly handle runs no function that writes, and calls its functions
// with FCALL_RO, whose keys the server checks for reading only: its Open
// asks only for the reads among those commands, so a user granted reads
// alone (with FCALL_RO in place of FCALL, FUNCTION LIST, SUBSCRIBE and
// the connection's commands, and FUNCTION LOAD where the server lacks the
// library), on the queue's keys for reading alone too (%R~walq:{NAME}*),
// opens it. Such a user's Open of a handle that may write (or OpenSorted)
// fails with queue.ErrInvalidOptions and the server's NOPERM, saying
// what to grant.
//
// The keys of an ack queue carry the version of their layout in their
// names (walq:{name}:2:...); layout 2 keeps each message in three fields
// of one hash (record, body, id), so that one command writes, reads or
// removes it. Handles of different layouts never touch each other's keys,
// and Open refuses a queue that still holds the keys of layout 1
// (ErrLayout, naming the keys to delete once it is drained). A handle of
// a release of layout 1 opened on a queue of layout 2 sees it empty: it
// neither reads nor writes these keys, so it loses none of their
// messages; what it enqueues goes to layout 1's keys, where handles of
// this version never look and for which their Open refuses the queue
// (drain it with that release). A handle of an earlier release of
// layout 2 (back to d5d54b0) shares the queue, or takes it over as it
// stands, with the caveats of mixed versions below: this version writes
// nothing those releases do not read (TestDowngrade). The value of the
// message hash's placeholder field (the empty field name, holding 256 '~': see the operator's
// list below) is layout 2's mark. A later release that changes what
// these keys hold without renaming them writes its own mark there (its
// layout's name after the '~') and in place of the ready and lease
// sets' placeholders, and one that renames them writes those into
// walq:{name}:2:* too; the functions of this version look at the marks
// as at the placeholders, so its handles refuse such a queue, at Open
// and at every call but an ack that finds its lease (an ack looks only
// when it fails), with ErrLayout naming both layouts, writing nothing,
// rather than misread it (TestNewerLayoutRefused).
//
// A receipt is the message's sequence number and a random 64-bit token
// drawn by the client for that delivery; an ack, nack, extend or dead
// letter succeeds only while the server holds that token for that
// message and the lease deadline is ahead, so a stale receipt fails with
// queue.ErrLeaseLost, also after a failover that lost writes (a token is
// never reissued).
//
// Blocking Dequeue waits on the handle's one pub/sub subscription: every
// script that makes a message ready publishes on the queue's channel (an
// enqueue only when a dequeue found too few messages since the last
// announcement; each consumer woken that leases wakes the next one of its
// handle), also a dequeue that promoted due delays and then failed on a
// key of the wrong type, so no goroutine polls and no goroutine holds a connection
// while it waits; a cancelled context or Close returns at once. The
// subscription pings its server after 3s without a message and drops a
// connection that answers nothing within 3s more (a host gone without a
// reset, a NAT or firewall that forgot the flow, a failover by DNS or
// VIP: the kernel would report the fault only once it gave up
// retransmitting, minutes later); it subscribes again on a new
// connection, and a waiter of the handle looks again, each that leases
// waking the next as for an announcement, so a wake-up
// lost to a silent connection reaches the waiters about 6s after the
// connection fell silent, once the new connection subscribed
// (TestSilentSubscriptionRedialed). A call
// to the server it has sent alone is waited for, bounded by
// Options.OpTimeout rather than the context, so that what the server
// leased reaches the caller (one sent together with other Dequeues
// leaves at its context's end, and what was leased for it is given
// back: see below) (also with a client that ends a command's wait when its context
// ends, go-redis's ContextTimeoutEnabled); the same holds for Pull,
// whose waiters a call that makes keys pullable wakes as a run of
// enqueues wakes Dequeues: once, each Pull woken that leases waking the
// next of its handle. Each open handle runs a
// housekeeper that ends expired leases and promotes due delays at the
// earliest deadline any handle set (announced on the same channel),
// except a handle opened with Options.ReadOnly (Open, OpenSorted,
// OpenWindowed): it reads (Stats, DeadLetters, DeadValues), runs no
// housekeeper, and its calls that would change the
// queue fail with queue.ErrReadOnly, so that inspecting a live queue
// changes nothing on it.
// A lease is announced only when it runs out before the last lease
// deadline announced, or that one has passed: until then every
// housekeeper is armed for that deadline or earlier, and the first
// housekeeping pass past it forgets it, so that a dequeue whose clock
// lags the housekeeper's announces its lease. A dequeue promotes
// due delays itself only once the earliest due time the queue keeps has
// passed, or when it finds nothing ready; both times are fields of the
// message hash, read and written with the message a dequeue leases.
// While handles of an earlier version share the queue, the delayed
// messages they add are made ready by the housekeepers, at the due time
// they announce, rather than by the next dequeue; and their housekeepers
// do not arm for a lease this version left unannounced, so while only
// handles of the earlier version end leases, a lease can be ended up to
// 30 seconds (their idle recheck) after its deadline. Upgrade the
// handles that end leases first. A sorted queue keeps each pulled
// batch's record twice (see below); a handle of an earlier version that
// acks, nacks, dead-letters or expires a batch a handle of this version
// pulled removes only the first, and the copy (about the record's size)
// stays in the batch hash for good, counted by those handles'
// Stats.SortedBatches. Likewise, a handle of any earlier version that
// ends a batch a handle of this version pulled leaves in the batch hash
// for good the key and count of values this version records of a batch
// apart from its record (see below), a few bytes more than the key; the
// handles whose Stats.SortedBatches counts the fields of the batch hash
// count each live batch of this version three times and each field left
// behind once. If both records of such a batch are unreadable, the
// earlier version's expiry ends its lease only: a single-flight key stays
// out of the pull order, as for a batch that version pulled (below). A
// handle of this version records each dead
// value's key with it, which a requeue needs; a value dead-lettered by a
// handle of an earlier version is listed by DeadValues with an empty Key
// and a reason saying so, and can be purged, not requeued (an error
// wrapping queue.ErrCorrupt; RequeueAllDead requeues the others and
// names it). Upgrade all handles of a sorted queue together.
//
// # Time
//
// Scripts take the time from the calling client's Options.Clock (the
// system clock by default): the hosts sharing a queue must keep their
// clocks in step (NTP); a skew of s shifts lease deadlines and delays by s.
// Times travel as microseconds, which a Lua number holds exactly until
// 2255 and to within 128 µs long after. A DedupWindow that is not a
// whole number of microseconds counts as the next whole one, so a handle
// refuses every id the embedded queue refuses (and, at the window's
// edge, may refuse one a microsecond longer). Likewise a delay, a
// deliver-at, a nack delay, a lease (AckTimeout, Extend) or a hold that
// ends between two whole microseconds ends at the later one: no message
// is delivered, nor key pulled, before its time, nor a receipt refused
// before its lease ends, as on the embedded queue; each comes less than
// a microsecond late at most (an Extend by less than a microsecond keeps
// the lease for one). A deliver-at past the year 38,503
// (2^60 µs) is due then, never wrapped into another time; a time.Time
// sort key outside the years 1678 to 2262 is refused, as by the embedded
// queue; a windowed queue whose clock is past 2262 plus its window takes
// every key as due, as the embedded queue does.
//
// # Durability
//
// Redis decides when it fsyncs; Open reads the server's configuration and
// refuses (queue.ErrInvalidOptions, saying what to change) a server that
// cannot keep the promise of Options.Sync: SyncAlways needs appendonly yes
// and appendfsync always, SyncInterval appendonly yes and appendfsync
// everysec or always; every mode needs maxmemory-policy noeviction, since
// eviction would silently delete queue keys. Options.TrustServer skips the
// check (for managed servers that refuse CONFIG). Options.Replicas makes
// every change wait for that many replicas (WAIT; fewer fail the call
// with ErrNotDurable, the change made; a dequeue or pull returns what it
// leased, or waits); Open refuses a WaitTimeout at or above the
// client's ReadTimeout, which would fail the call's pipeline and lose
// its reply; replication is
// asynchronous, so a failover can still lose acknowledged writes (see the
// README's table). A ReadOnly handle writes nothing, so Open checks
// none of this for it, and opens it on a read-only replica that holds
// this version's library (replicated from its master once a handle of
// this version opened there; a replica that lacks it cannot load it, and
// the ReadOnly Open fails with queue.ErrInvalidOptions saying so). Any
// other Open, and OpenSorted, refuse a read-only replica
// (queue.ErrInvalidOptions, saying the server is a replica), which would
// refuse every write: they call a function of the library that writes
// nothing but is flagged as a writer (FCALL, granted above), which a
// replica refuses unrun (a replica that lacks this version's library
// refuses its load the same way); a master past maxmemory runs it. A master
// that refuses writes for a while (MISCONF, NOREPLICAS) is opened, once it
// holds the library: the calls report the refusal until it clears. Loading
// the library into a server (the first Open of a version) is a write: it
// fails while the server refuses writes.
//
// Two crashes of the server in a row can break a call's atomicity on a
// server whose AOF loader cuts a torn MULTI/EXEC block inside the block
// rather than before its MULTI, as Redis 7.0.15 does with
// aof-load-truncated yes (its default; Valkey fixed its loader in
// valkey-io/valkey#4342). The first restart drops the torn call's writes
// but leaves its MULTI open at the end of the AOF, and the server appends
// after it. The second restart then either applies the torn call's first
// half, with everything written after it, as one transaction closed by
// the EXEC of the next call that made several writes, on a state that
// has moved on; or, when no such call came before the second crash,
// reverts everything the server acknowledged since the first restart.
// Messages are lost, delivered twice, under another key or out of order,
// and dead values have no record (DeadLetters gives their reason as
// "corrupt record: missing"). No function can guard against it:
// it happens as the server loads. Run a server with the fixed loader, or
// set aof-load-truncated no and, when the server then refuses to start on
// a torn AOF, run redis-check-aof --fix on its manifest, which cuts the
// file before the open MULTI (see the README's failure table).
//
// # Differences from the embedded queue
//
//   - A receipt is lost at its deadline, before any housekeeper has ended
//     the lease (the embedded queue ends it at the deadline itself).
//   - Leases of a crashed consumer run to their deadline (the server does
//     not know the process died); the embedded queue ends them when the
//     next process opens the directory.
//   - EnqueueBatch is all or nothing, also across a crash.
//   - Everything lives in the server's memory, payloads included.
//   - Stats fills the counts, counters, OldestEnqueuedAt, DedupIDs, Sync,
//     AckTimeout, At (by the handle's Options.Clock) and Closed; the log
//     fields stay zero. OldestEnqueuedAt is read from the oldest live
//     message's stored body: when it is missing or does not decode,
//     OldestErr (queue.ErrCorrupt) names the message and OldestEnqueuedAt
//     is zero, where the embedded queue still gives the age of the other
//     messages it holds in memory. A closed handle reads nothing: its
//     Stats has Closed set and zero counts, where the embedded queue
//     keeps the last ones. StatsContext reports errors. Acked is derived
//     (the sequence counter less the live and purged messages): once an
//     operator deleted or lowered the sequence counter it would be below
//     zero, and reads 0, as any counter below zero does, never wrapped;
//     CountsErr, wrapping queue.ErrCorrupt, then names the counter (a
//     lowered sequence counter gives the next enqueue a live message's
//     seq).
//   - A sorted or windowed queue's OldestEnqueuedAt is, as on the embedded
//     queue, the publish time of its oldest pending or leased value (dead
//     values left out, whatever their sort key), read from a set of those
//     values ordered by publish time (the key walq:{name}:s:age, one
//     16-byte member per value) that every call adding or removing a
//     value keeps. A queue written by a release before that set holds
//     values it does not name: while any of them is pending or leased,
//     OldestEnqueuedAt is zero (unknown, never a later value's time), and
//     it is read again once they are acked or dead. A value whose stored
//     record names no publish time makes OldestErr (queue.ErrCorrupt)
//     name it, with OldestEnqueuedAt zero. A handle of an earlier release
//     keeps running that release's functions beside this one's (each
//     release loads a library of its own name): members it leaves behind
//     (it acked or dead-lettered their values without keeping the set)
//     are passed over by Stats and taken out by housekeeping once they
//     reach the head of the set; a value it publishes, or requeues from
//     the dead set, is not in the set until acked or dead, and when
//     members it left behind make up the count, Stats gives the oldest
//     time among the values in the set, which can be later than that
//     value's. Upgrade every handle of a queue before relying on its age.
//     The values of a leased batch whose record and its copy both cannot
//     be read stay stored, and in the set: Stats takes them for live
//     values, and may give the publish time of one of them.
//   - A sorted or windowed queue's RequeueDead and RequeueAllDead do not
//     read a dead value's payload first: one whose stored record is
//     damaged is requeued, and the pull that cannot read it dead-letters
//     it again (the embedded queue refuses it). A fenced name
//     (RequeueDeadValue, PurgeDeadValue) of a value whose publish time
//     cannot be read (DeadValues lists it with a zero PublishedAt, and
//     with what else of it reads) is refused with queue.ErrCorrupt: name
//     it by its seq. Each of these changes is one call of the server; the ones
//     over every dead value run in calls of 1000.
//   - A sorted or windowed queue refuses a message key of 65,535 bytes
//     or more (queue.ErrInvalidOptions); the embedded queue takes it.
//   - Both take any positive AckTimeout, under a millisecond too (the
//     Redis engine's lease ends at the next whole microsecond), and
//     refuse a MaxMessageSize over 1 GiB (queue.MaxMessageSizeLimit;
//     queue.ErrInvalidOptions).
//   - Both hold a payload to MaxMessageSize (queue.ErrTooLarge at one
//     byte more); the embedded queue also refuses, with
//     queue.ErrTooLarge, a record that its headers, id, key or
//     dead-letter reason make longer than MaxMessageSize plus 1 MiB,
//     which a handle takes, but for a key: one that long is past the
//     key limit above (queue.ErrInvalidOptions).
//   - A DequeueBatch of more than 1,000 messages leases them in calls of
//     up to 1,000, each one step on the server and each lease running
//     AckTimeout from its own call: another consumer may lease between
//     two calls, and an error or an ended context after the first
//     returns the messages leased so far, without the error (the
//     embedded queue leases a batch of any size in one step).
//   - Handles with different DedupWindows may share a queue at once, so
//     the window is each handle's own but the stamps of acked ids are
//     shared: an ack or purge by a handle with a window stamps a
//     producer-given id; a handle refuses an id stamped within its own
//     window (at now less the window or later, the clock at or before
//     the ack included) and, as it enqueues, forgets up to 128 stamps
//     older than that per call. A handle without a window refuses only
//     live ids (ready, delayed, leased or dead), stamps nothing and
//     forgets no stamp but that of an id it enqueues anew; so a later
//     handle with a window still refuses an id acked within it, where
//     the embedded queue's open without a window forgets every acked id
//     as it enqueues, for the opens after it too, as one with a shorter
//     window forgets every id past it. Give every handle of a queue the
//     same window.
//   - Stats.DedupIDs counts an acked id only within the handle's window:
//     the moment the window has passed it counts no more, where the
//     embedded queue counts it until its next enqueue (which forgets it).
//
// A call that times out or loses its connection leaves its outcome
// unknown: the script may have run. Retry an Enqueue only with WithID.
// Give a handle a client that does not retry (go-redis's MaxRetries: -1;
// its default is 3, and walq-redis sets -1 unless its URL gives
// max_retries; a ClusterClient also needs MaxRedirects: -1, as it sends a
// command again up to MaxRedirects times whatever its MaxRetries; a
// Sentinel client, NewFailoverClient or NewFailoverClusterClient, which
// takes MaxRedirects from it, needs only MaxRetries: -1): a
// client that retries sends a call whose connection dropped again on a
// new one, and when the first run had happened the caller gets the
// second run's outcome with no error: an Enqueue of a generated id
// enqueues its message twice, an Ack or a settle that happened fails with
// ErrLeaseLost, an Enqueue WithID that happened fails with ErrDuplicate,
// a Dequeue's first lease is held by no one until it runs out. Open,
// OpenSorted and OpenWindowed refuse such a client for a handle that may
// write (queue.ErrInvalidOptions), and a client whose retries they cannot
// read (not a *redis.Client, *redis.ClusterClient or *redis.Ring, such as
// an application's wrapper): set Options.AcceptDoubleRuns to open on it
// and accept those outcomes. A ReadOnly handle opens on any client: its
// calls change nothing. What no retries cost: a call that may write and
// whose connection drops returns the error (its outcome unknown, as
// above) where a retrying client might have hidden it; a blocking
// Dequeue or Pull returns it too, and the caller calls again. The handle
// sends again itself, up to 4 times in all, while its connection drops
// (EOF, reset) and its context lasts, what a second run leaves as the
// first did: what only reads (Stats, the dead-letter reads, Open's
// CONFIG GET), the library's FUNCTION LOAD of the same code, and Open's
// checks and subscription (a sorted queue's HSETNX of its kind, form and
// SingleFlight, each read back after it); its own
// housekeeping retries its failed pass every second, and its wake-up
// subscription reconnects by itself.
//
// # Failovers and moved slots
//
// A cluster client of MaxRedirects -1 does not follow a moved slot; the
// handle does, for every call, writes included. Redis answers some
// errors before it runs a command (processCommand, and in a cluster
// getNodeByQuery): MOVED (the slot is another node's: after a failover,
// from the demoted primary too, or once a migration ended), ASK and
// TRYAGAIN (the queue's slot is migrating: the handle waits for the
// migration to end rather than follow ASK with ASKING, which the
// importing node answers with TRYAGAIN as long as any of a call's keys
// is missing there, as some of a queue's always are), CLUSTERDOWN (the
// cluster settles), READONLY (a primary demoted to a replica) and LOADING
// (a restarted server reads its data). Such a reply proves the call did
// not run, so the handle sends it again, after asking a cluster client to
// look up the slots again, waiting 5ms, then twice as long each time up to
// 200ms: a call rides through a coordinated failover (CLUSTER FAILOVER)
// or a resharding with no error, run once. The wait lasts at most
// OpTimeout (with Replicas, plus WaitTimeout) from the first refusal,
// after which the call returns the last refusal; it ends sooner when the call's context ends (a Dequeue's
// or Pull's too, since it leased nothing), with the context's error
// wrapping the refusal, or when the handle closes (queue.ErrClosed).
// Concurrent Enqueues, Acks and lone Dequeues of a handle go to the
// server together, one call at a time, and an Enqueue or Dequeue leaves
// when its context ends wherever it is: queued behind a call that waits
// (its context's error: nothing carried it), or sent together with
// others, whose call runs on for them under OpTimeout and, when it is
// refused, is sent again with only the callers still there. An Enqueue
// that leaves between a refusal and the next send returns its context's
// error (its message is in no later send); one that leaves while a send
// that carries its message is in flight returns ErrMayHaveRun, wrapping
// the context's error, with the message's id: the server may run it
// (send it again only WithID). An Enqueue sent alone runs in its
// caller's goroutine under its own context and waits for its reply as
// long as the client does (go-redis: its ReadTimeout, or the context's
// deadline with ContextTimeoutEnabled); when its context ended and the
// client stopped waiting, it too returns ErrMayHaveRun with the id
// (TestLoneEnqueueLeavesInFlight), and so does an EnqueueBatch, with
// every id (TestEnqueueBatchLeavesInFlight), and a sorted or windowed
// Publish, with no id (TestPublishLeavesInFlight): a sorted queue keeps
// no id per value, so a Publish sent again after ErrMayHaveRun publishes
// its value twice if the first ran, and a batch of its key holds it
// twice; on a client that sends a
// command again itself (AcceptDoubleRuns) also when its context ended
// the client's wait to send it again, which returns the context's error
// alone. A message leased for a Dequeue that left is given back at once,
// ready again where a nacked message goes but counted neither as a
// delivery (MaxDeliveries, Message.Deliveries,
// Stats.Delivered) nor as a nack, since no consumer got it; should that
// fail, it is delivered again when its lease runs out, which counts that
// delivery as a lease that ran out does. Close waits for such a call
// still under way (no more sends once Close began but the give-back of
// what the send in flight leased for callers that left, which waits out
// a refusal as it would before Close, and the burial of a body it leased
// that does not decode: at most that send's reply, one give-back and
// one burial per such body, each within OpTimeout, plus WaitTimeout with
// Replicas), so that the handle sends nothing after Close returned, and
// a Dequeue that left while Close ran costs no delivery either.
// A call that was never written is sent again as a refused one is: one
// whose connection could not be made (the dial's *net.OpError: refused,
// no route, the dial's timeout), as when a primary died and the client
// still names it as the slot's owner, until the client's slot map names
// the promoted replica; and one that found no connection of the
// client's pool free within its PoolTimeout (redis.ErrPoolTimeout);
// and one whose new connection failed (a timeout, a reset) while the
// client set it up, before it wrote the call: go-redis first sends HELLO
// (AUTH after a refused HELLO) and CLIENT SETINFO on a new connection,
// and writes the call only once they succeed. Such a call whose context
// ended returns the context's error, not ErrMayHaveRun (but on a client
// that sends a command again itself, below).
// Tested by injecting them: a dial's error under an Enqueue and an Ack
// (TestUnsentSentAgain), the pool's timeout under an Enqueue
// (TestPoolTimeoutSentAgain): sent again, and run once; a new
// connection whose HELLO reply a proxy holds, under a lone Enqueue, an
// EnqueueBatch and a Publish (TestSetupStallNotInFlight): the context's
// error, and nothing run; so too a call whose context ended before it
// was written, its deadline past or passed while it waited for a
// connection of the pool (TestEndedContextNotInFlight). go-redis tells a setup's failure apart only by
// its shape (setupFailed): a timeout of an AUTH sent after a refused
// HELLO or of the pipeline sent after HELLO for Options.DB, ClientName
// or a cluster's ReadOnly, and an EOF during setup, still count as a
// call that may have run.
// A call written to its connection that then failed (EOF, a reset, a
// broken pipe, a timeout waiting for the reply) is not sent again, since
// it may have run (its outcome is unknown, as above; each injected
// after the write, TestUnsentSentAgain: the error returned, run once),
// nor one that failed any other way. On a client that sends a command
// again itself (AcceptDoubleRuns), a dial's error, the pool's timeout or
// a failed setup is only that of the client's last send, which may
// follow a send that ran: such a call is not sent again, and a caller
// that left a group meanwhile gets ErrMayHaveRun
// (TestResendingClientDialNotSentAgain, TestUnrunResending).
// A refusal on such a client is sent again, though it too proves only
// that the client's last send did not run: a call that may write can
// then run twice (see Options.AcceptDoubleRuns for what that costs).
// The sends after the first wait for a connection no longer than
// OpTimeout after the first failed: a call whose context has no
// deadline returns within one send and OpTimeout, where a second whole
// send could start before (against an address that drops packets, with
// go-redis's defaults: about 30.5s, from about 51s before the bound, as
// TestBlackholeDefaults measures, bench/results/redisq-blackhole-2026-12-06.txt;
// TestBlackholeCallBound checks each send's deadline against the bound).
// Close there ends the subscription's redial: go-redis dials a
// subscription again under the context of the receive that found it
// broken, holding the lock its close takes, and the handle receives
// under a context that Close ends first, so Close returns at once and
// leaves no goroutine of the subscription (TestCloseDeadServer). Only a
// Dialer that ignores its context is not ended so: Close waits for the
// subscription no longer than OpTimeout, returns an error saying so,
// and the subscription closes once that dial ends (TestCloseDeafDialer).
// Open rides a failover as a call does, for its commands that are safe
// to send again (its checks' reads and no-writes functions, the
// library's load, a sorted queue's records, SUBSCRIBE), each within
// OpTimeout, looking up the queue's master again for each send; it does
// not ride READONLY, which it reports as a replica's
// (TestOpenRidesDialErrors: a dial error injected under each;
// TestOpenOnReplicaNotRidden).
// A primary killed (kill -9) under traffic in a cluster of three
// primaries with a replica each (TestClusterPrimaryKilled, Replicas 1
// and 0): no call returned a dial error, and with Replicas 1 every
// Enqueue that returned nil was delivered and no message was delivered
// after an Ack of it returned nil. The handle's wake-up
// subscription needs nothing for a move: Redis Cluster sends every
// PUBLISH to every node, so the subscription hears the new owner's
// wake-ups wherever it is, and one whose node died subscribes again
// (go-redis), after which a blocked consumer looks again, each that
// leases waking the next (TestResubscribeWakesOne). A call sent
// again runs with the time it was first made: a Dequeue's lease counts
// from then.
//
// A Ring gives a queue no failover: once go-redis's Ring finds a shard
// down it maps that shard's keys to the shards left, so the queue's
// calls run there, on another, empty queue of the same name. What the
// down shard holds is not delivered meanwhile (its receipts fail with
// ErrLeaseLost until it is back), and what is enqueued meanwhile stays
// on the other shard, hidden once the shard is back
// (TestRingShardDownHidesQueue). Give a queue that must outlive a host a
// ClusterClient or a Sentinel client.
//
// A handle applies its own MaxDeliveries whenever it would deliver, as
// the embedded queue does: a ready message (a sorted queue's pending
// value) that had that many deliveries already, given back by a handle
// with a higher limit or none, goes to the dead-letter set with the
// reason "N deliveries, limit M; not delivered again" (counted in
// Stats.Dead and Stats.DeadLettered, or Stats.SortedDead), and the next
// one is delivered in its place. An ack-queue message counts at most
// 99,999,999,999,999 deliveries, the most a script reads back whole: a
// handle with no limit or a higher one applies that one as M. A script
// call that dequeues for n messages (a DequeueBatch of n, up to 1,000
// a call, or n concurrent Dequeues gathered into one call) stops once it has moved 1,000 such messages (corrupt ones,
// below, included), checking after each round of up to n pops, so it
// moves at most 999 + n of them (1,000 for a lone Dequeue); the handle
// calls again for the rest, so no run of them makes one call hold the
// server long or a TryDequeue return ErrEmpty while a deliverable
// message waits. Handles of earlier versions deliver such an ack-queue message
// once more: upgrade them.
//
// A message whose stored record or body cannot be read (a field of the
// queue's keys overwritten by hand or by a faulty client) is not
// delivered and not lost: the dequeue that meets it, or the housekeeper
// at its lease deadline, moves it to the dead-letter set with a reason
// that starts "corrupt record: " and says what is wrong (missing,
// unreadable, which a dequeue, a nack and a lease's end also say of a
// delivery count of more than 14 digits, body missing, payload
// undecodable), keeping its id and producer flag where the record or body
// still tells them, and delivers the other messages of the call. A
// dead-lettering by receipt (DeadLetter) keeps its own reason and reads
// such a count as 0.
// Such a message counts no delivery (Stats.Delivered, its Deliveries).
// A DequeueBatch or Pull that buries one returns the others with a nil
// error, where the embedded queue leaves an unreadable message leased and
// returns the others with an error naming it (there a read error may be
// an I/O error, not damage); code that processes what is returned, then
// handles the error, runs right on both.
// DeadLetters lists such a letter too, with what its record or body still
// tells. When neither tells its id, the reason ends "; id unknown", and
// an id its producer gave stays taken (Enqueue with it is refused with
// ErrDuplicate): RequeueDead or PurgeDead with that id still reaches the
// letter and frees the id, PurgeAllDead cannot. To free the id of such
// a letter purged already, remove the field "i" + id of the hash
// walq:{NAME}:2:msg (HDEL).
// Every script checks what it reads of a message before its first write
// for it: a Lua error does not undo a script's earlier writes. A pulled
// batch of a sorted queue holding a value that does not decode goes to
// the dead set whole. Handles of earlier versions fail their dequeue on
// such a message after taking it from the ready set, which strands it
// (neither ready nor leased), and their DeadLetters fails on a dead
// letter whose body is gone: upgrade them.
// A pulled batch's record is kept twice, so that a garbled one still
// names its values (they go back to their key at the lease's end): the
// copy is read when the record does not decode, or when the two differ
// and the record fails a check the copy passes (each value under the
// batch's key, and still stored). A batch neither of whose records reads
// fails its settle by receipt with queue.ErrLeaseLost; at its lease's
// end nothing names its values, which are neither given back nor
// dead-lettered (they stay stored), but the key and count of values the
// pull recorded apart still end the batch: its key is pullable again
// (also under SingleFlight) and Stats.SortedLeased no longer counts its
// values; RequeueExpired reports such batches with an error wrapping
// queue.ErrCorrupt, naming each lease and key, and the housekeeper logs
// it (Options.Logger). A batch a handle of an earlier version pulled has
// no such record: a single-flight key of one whose records are both
// unreadable stays out of the pull order (its count of leased batches,
// its field in walq:{NAME}:s:flight, stays raised; delete the field to
// let it go on). A
// member of a sorted queue's pull order or pending set that names
// nothing (written by hand) is dropped by the pull that meets it.
// A key of a queue overwritten with another type (a SET by hand) fails
// every call that needs it, with an error naming the key, and the call
// leaves the queue as it was (it checks first, or takes back what it
// wrote; a dequeue that must bury a damaged record checks the delayed
// set too, since the burial may empty the ready set and lead it to
// promote); restoring the key (or deleting it, losing what it held) lets
// the queue go on. Never delete a queue's sequence counter (seq): the
// numbering would restart and new messages would overwrite live ones;
// set it back to a number above every message's instead. A counter of
// the queue's stats hash (walq:{NAME}:2:stats, walq:{NAME}:s:stats) set
// to what is not an integer of at most 18 digits fails, the same way,
// every call that would add to it, with an error naming the key and the
// field; setting the field to a number lets the queue go on. A sorted
// queue's count of a key's leased batches (a field of
// walq:{NAME}:s:flight) that HINCRBY could not add 1 to or take 1 from
// (no integer, or at either end of a 64-bit integer) counts as none, and
// the next pull of the key sets it to 1. The checks
// read each key with a command of its own type (GET, HMGET, ZCARD), under
// pcall, before the first write. No
// stored data makes one call run long: a dequeue buries at most 1000
// damaged records a call, a pull passes at most 1000 order members that
// lease nothing (strays, keys whose pending values are gone) and
// releases at most 1000 ended holds (Stats reads as many: it counts a
// key whose hold has ended in Stats.SortedKeys, as the embedded queue
// does, though no pull released it yet); a pull leases at most 1000
// batches a call, and a Pull whose max allows more (math.MaxInt:
// everything) calls again while the call leased that many, each call
// taking the keys first in order then. A call that stops so is called
// again by the handle, a pull only when it leased nothing (also after
// earlier calls of the same Pull leased; one that leased returns what it
// leased, and wakes the other handles' waiting pulls, which would sleep
// else), so no dequeue or pull reports empty, nor leaves a waiting pull
// asleep, while a message or key is behind them. When a later call of
// such a Pull fails (its ctx ends between the calls, the connection
// drops), the Pull returns the batches leased before with a nil error,
// as a dequeue returns the messages it leased; the next Pull reports the
// failure if it lasts.
//
// A sorted queue records the kind of its sort keys (int, uint, float,
// time or string) and its form (sorted or windowed) when it is made, and
// OpenSorted or OpenWindowed with another kind, or of the other form, is
// refused (queue.ErrInvalidOptions; the embedded queue's ErrWrongKind):
// a sorted handle would pull a windowed queue's keys before their window
// closes. The window itself is not recorded: every handle must agree on
// it. A queue made by an earlier version records no form, and takes a
// handle of either. One made before the kind was recorded records no
// kind either: there a pull of a string handle is
// refused before it leases anything when the queue holds another kind,
// and one of another kind when it holds strings, as far as the stored
// sort parts tell: an 8-byte sort part can be read both ways (a string
// of 6 bytes, or fewer with zero bytes escaped, is stored in 8 bytes),
// and between int, uint, float and time nothing tells. Open such a queue
// only with the kind it was made with.
//
// A sorted or windowed queue records SingleFlight too (the field
// "single" of its stats hash) once a handle with it opens the queue, and
// OpenSorted or OpenWindowed refuses a writing handle without it there
// (queue.ErrInvalidOptions): its pull, ack or requeue of a dead value
// would put a key with a batch out back in the pull order, and a second
// batch of the key would be leased at once. walq-redis opens a queue with
// the setting it records. A handle without SingleFlight records nothing,
// so a queue that records none (never opened with it, or made by an
// earlier version) opens a handle of either until one with it opens and
// records it; a master that refuses writes then (past maxmemory, short of
// replicas) leaves it unrecorded until a later open with it. Once it is
// recorded, the queue's scripts keep a key with a batch out from the pull
// order whatever the calling handle's setting, so a handle without
// SingleFlight that opened before (and is not refused) honours it as
// well, and a pull leases no key with a batch out: one it finds in the
// order it takes out, and the batch's settle or expiry puts it back.
// Until then each handle's own setting decides. A handle of an earlier
// version of this package runs that version's library, which reads only
// the handle's own setting: without SingleFlight, its publish, settle or
// requeue puts a key with a batch out back in the order, and a pull of
// an earlier version (with SingleFlight or without) leases that key a
// second time at once; a pull of this version does not (it takes the key
// out, and until it does, Stats.SortedKeys counts that key). So while handles
// of an earlier version share a single-flight queue, give every one of
// them SingleFlight. To turn it off, stop every handle and set the
// field to 0; a field that holds anything but 0 or 1 refuses every
// writing handle, quoting it. A ReadOnly handle neither records nor checks it.
//
// # Cost
//
// The server does the work: a batched message (EnqueueBatch,
// DequeueBatch, concurrent Acks, Enqueues and Dequeues, which a handle
// gathers into one call per kind) costs some 20-30 µs of Redis CPU, one
// message per call several times more (each call has a fixed cost,
// which the function library keeps lower than a script: its helpers are
// made once per load, not once per call; and Dequeues, lone or gathered
// (not DequeueBatch), Acks by receipt, lone or gathered, and Enqueues of
// generated ids ready at once, up to 128 per call, call functions of
// their own that take only the keys and arguments they use, since each
// costs the server). A queue's hot keys are created with a 256-byte placeholder member
// that is never removed, so that they keep Redis's hashtable and skiplist
// encodings when the queue drains: recreated as small listpacks, every
// batched command on them would be linear in their size.
//
// # Operators
//
// redisq/cmd/walq-redis is the walq command with this backend: its
// commands that take a queue directory also take the URL of a queue,
// redis://host:port[/db]/NAME, whose NAME is %-unescaped (team%2Fjobs
// names team/jobs; a literal '%' is written %25).
//
// What an operator's command on a live server does to the open handles:
//
//   - The durability check is Open's alone: a CONFIG SET of appendonly,
//     appendfsync or maxmemory-policy after it is not seen, and the
//     handles' calls then keep only what the new setting keeps.
//   - FUNCTION FLUSH, or FUNCTION DELETE of a library: the next call that
//     finds its library gone loads it again and runs; one that finds it
//     gone again after that load fails with the server's "ERR Function
//     not found", having run nothing (TestFunctionFlushUnderTraffic).
//     SCRIPT FLUSH touches no function.
//   - BGREWRITEAOF and DEBUG RELOAD keep every call that returned, also
//     across a kill -9 after them (TestKillServerAfterOperator).
//   - CLIENT PAUSE WRITE holds the calls that may write until it ends or
//     their wait ends (the context, OpTimeout with a client that ends a
//     command's wait with its context, else the client's ReadTimeout: see
//     Options.OpTimeout; such a call's outcome is unknown); reads (Stats,
//     DeadLetters) run.
//   - Deleting or expiring the queue's sequence counter
//     (walq:{NAME}:2:seq, walq:{NAME}:s:seq) while the queue holds
//     messages, or did (an ack queue's lease set kept: see below), makes
//     every enqueue or publish fail with queue.ErrCorrupt naming the key,
//     rather than give a new message the seq of a live one
//     (TestSeqKeyLost, TestSeqKeyLostDrained,
//     TestSortedSeqKeyLost): SET it to at least the largest seq the queue
//     holds and at least 1, a sorted queue's also to at least its count
//     of publishes, which the error gives. A handle of an earlier
//     release does not check this. FLUSHDB, or deleting every key of a
//     queue, leaves an empty queue: what it held is lost and receipts
//     handed out before fail with queue.ErrLeaseLost.
//   - Deleting or expiring an ack queue's message hash, ready set or
//     lease set (walq:{NAME}:2:msg, :ready, :lease) once it enqueued, one
//     of them or all three with the counter left, makes every call that
//     carries the key fail with queue.ErrCorrupt naming it, Open and the
//     housekeepers (which log it every second) included, having written
//     nothing (TestLostKey, TestLostKeyDrainedQueue,
//     TestLostMsgNotPromoted, TestLostLeaseNotPromoted); what the key held
//     is lost, where going on would lose it without a word (messages
//     never delivered, leases never ended). Each function looks at the
//     placeholders those keys keep from the first enqueue on (the hash's
//     empty field name and the sets' member of 256 '~', scored +inf),
//     with no round trip: the functions that run for each message tell
//     them from the replies of the commands they run anyway (an enqueue
//     adds ready's placeholder with its message, a lease adds lease's
//     and reads msg's with the record, an ack looks only when it fails),
//     the others read them first. An enqueue of generated ids does not
//     look at lease, which it does not write; a lone Dequeue carries no
//     counter, and a lone Ack neither the ready set nor the counter
//     (an ack a lost ready set leaves right): any other call reports
//     the rest. Write the placeholder back, as the error says, to go on
//     with what is left (the messages whose records a lost message hash
//     held then go to the dead letters, reason "corrupt record:
//     missing"), or delete every key of the queue to start again. Some
//     placeholders without the others on a queue whose counter is 0 or
//     absent and whose keys hold no message are no loss: a first enqueue
//     refused on a key of the wrong type leaves that, and once the key
//     is mended the queue runs (TestRefusedFirstEnqueueLeavesNoLostKey).
//     A release before 5a7e6e2 that refused a queue's first enqueue that
//     way kept its seq, so the queue, once mended, ran on without the
//     lease set's placeholder (or the ready set's): this version reports
//     that key as lost although it may lose nothing; write its
//     placeholder back, never delete the queue's keys for it. A handle
//     of an earlier release does not check this.
//   - Deleting or expiring a sorted or windowed queue's value hash,
//     delivery counts, dead-value reasons, batch records or stats hash
//     (walq:{NAME}:s:val, :vinfo, :vreason, :batch, :stats) once it
//     published, one of them or all five with the counter left (every
//     key but the counter, say), makes every call fail with
//     queue.ErrCorrupt naming the key, Open and the housekeepers
//     included, having written nothing (TestSortedLostKey, for both
//     forms): what the key held is lost (payloads, delivery counts, the
//     reasons and places of dead values, leased batches, the lifetime
//     counters), where going on would lose it without a word. Those
//     hashes hold a placeholder under the empty field name (256 '~') from the
//     first publish on; each call reads the five in the call, before it
//     writes (no round trip): most from the reads of the type checks it
//     runs anyway (a pull reads no more), a publish with four HGETs, that
//     of stats told by its count of publishes. BenchmarkSortedAgainstPrevious
//     measures what it costs the server: a publish some 5-10 % more than
//     the release before, a pull and its acks a few percent. A key of
//     another type under one of those names, on a queue that has no
//     placeholder yet, is no lost key: the calls that use it name it
//     (TestSortedStrayKeyNotLost). A queue whose only publishes were
//     refused by a sorted release before a95710d (which kept the counter
//     at 1 on a key of the wrong type) is reported as having lost val:
//     delete its counter too. A queue an earlier release
//     published to holds none, and its stats hash counts its publishes:
//     it opens as it stands, and the first call that may write writes
//     them (TestSortedUpgradeAdoptsQueue). Write the placeholder back
//     (HSET walq:{NAME}:s:val "" <256 ~>), as the error says, to go on
//     with what is left (a value whose payload is gone goes to the dead
//     values when pulled), or delete every key of the queue to start
//     again. The five deleted with the counter too read as a new queue.
//     A handle of an earlier release reads no placeholder, so it neither
//     counts nor lists one (TestSortedPlaceholdersDowngrade), and does
//     not check this.
//   - Deleting or expiring an ack queue's delayed set, dead set, dedup
//     stamps or stats hash, or a sorted queue's pending set, pull order,
//     lease deadlines, holds, dead set or age set (:pend, :order, :bdue,
//     :hold, :dead, :age), still loses what they held without an error:
//     delayed or pending values never delivered, dead letters never
//     listed, leases never expired, ids taken again, counters reset.
//     Those keys hold no placeholder: one would be counted by the Stats
//     (ZCARD), or listed among the dead letters, of the handles of
//     earlier releases that share the queue, and an earlier sorted
//     handle drops a member of order that names no key and prunes the
//     age set of members it does not read. A sorted queue's key places
//     and batch counts (:pos, :flight) hold none either: their fields
//     are the queue's keys, which may be any string, the empty one included; a lost
//     pos mends itself (a pull reads the key from its place in the
//     order), a lost flight lets a SingleFlight key be leased a second
//     time while a batch of it is out. Never set a TTL on walq:{NAME}*.
//   - A counter that Stats reads holding text (or a number HINCRBY
//     cannot add to), set by hand or by other software (an ack queue's
//     stats fields nacked, expired, dead, purged, pids, its message
//     hash's '#d' and its sequence counter, key :seq; a sorted queue's
//     published, pulled, acked, leased), makes Stats fail with
//     queue.ErrCorrupt naming the key, the field and the HSET (or SET)
//     that mends it, not with a Lua error (TestStatsCounterText); the
//     calls that add to a stats field refuse it the same way, having
//     written nothing (TestWriteCounterText), and so do an enqueue and a
//     publish on a queue whose sequence counter (:seq, of either kind)
//     holds text (or a number INCR cannot add 1 to), naming the key and
//     the SET that mends it (TestEnqueueSeqText); a sorted queue's first
//     publish refuses it before it writes the placeholders of its hashes
//     (TestFirstPublishSeqRefusedFirst).
package redisq
