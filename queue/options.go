package queue

import (
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/walq/walq/internal/testhook"
	"github.com/walq/walq/wal"
)

// SyncMode says when the queue fsyncs its log; see the package
// documentation for what a crash can lose in each mode.
type SyncMode = wal.SyncMode

// The sync modes.
const (
	// SyncAlways: every call returns after the fsync that covers its record.
	SyncAlways = wal.SyncAlways
	// SyncInterval: calls return after the write; the fsync that covers
	// their records starts at most Options.SyncInterval after the write.
	SyncInterval = wal.SyncInterval
	// SyncNever: calls return after the write; fsync only at segment
	// roll-over, snapshots and Close.
	SyncNever = wal.SyncNever
)

// Options configures a queue. A nil *Options means the defaults; zero
// fields take their defaults.
type Options struct {
	// AckTimeout is how long a delivery owns its message, counted from the
	// delivery. Default 30s.
	AckTimeout time.Duration
	// MaxDeliveries is how many deliveries a message gets before a nack or
	// an expired lease moves it to the dead-letter set. A ready message
	// (a sorted queue's pending value) that already had as many, made
	// ready by an open with a higher limit or none such as walq's writing
	// commands, goes to the dead-letter set when a delivery (a pull) would
	// take it, instead of being delivered.
	// Default 10; a negative value means no limit.
	MaxDeliveries int
	// Sync is the fsync policy. Default SyncAlways.
	Sync SyncMode
	// SyncInterval is, under SyncInterval, the longest a write waits for
	// the fsync that covers it to start. Default 50ms.
	SyncInterval time.Duration
	// DedupWindow is how long the id of an acked message with a
	// producer-given id keeps refusing duplicates. Default 0: only live
	// messages refuse them, and Open forgets the acked ids an open with
	// a window kept (see the package doc, Delivery).
	DedupWindow time.Duration
	// MaxMessageSize is the largest payload accepted. Default 4 MiB; at
	// most MaxMessageSizeLimit (1 GiB), as on the Redis engine.
	MaxMessageSize int
	// SegmentSize is the target size of a log segment file. Default 4 MiB:
	// the log keeps its last segment in memory while writing it. A
	// salvaging or read-only open (Repair, walq repair, a preview) without
	// it does not know the size the queue's segments were sealed at, and
	// then never takes a segment that ends short of the next one's name
	// for a roll a crash tore: a missing segment is not repaired away.
	SegmentSize int64
	// SnapshotBytes is how many log bytes written since the last snapshot
	// make the queue take another one, bounding replay time. Default 64 MiB.
	// The append that brings the count to SnapshotBytes wakes the
	// background goroutine, which then compacts as Compact does (the
	// snapshot, then copies forward if the log is still over its bound);
	// after a failed compaction, not before its backoff (250ms, doubling
	// up to a minute) has passed. Bytes appended while a compaction runs
	// count towards the next one, which starts as soon as this one ends if
	// they already reach SnapshotBytes. The queue also compacts, before
	// SnapshotBytes, on each append that passes a multiple of SegmentSize
	// since the last snapshot while the log holds more than twice the live
	// bytes plus two segments; and Close takes a snapshot. A snapshot
	// holds the index entry of every live message, however few bytes were
	// written since the last: when the writes fill SnapshotBytes faster
	// than the backlog's snapshot is written, the background goroutine
	// compacts back to back, writing the whole index each time.
	SnapshotBytes int64
	// ManualRequeue turns off the automatic return of expired leases; call
	// RequeueExpired instead.
	ManualRequeue bool
	// AppendOnly makes the log write its segments by appending alone,
	// without the zeros it otherwise writes and fsyncs ahead of its end
	// under SyncAlways, so that a record's fsync commits no new file size
	// (wal.Options; under SyncNever and SyncInterval none are written).
	// For file systems that do not overwrite in place (btrfs, ZFS).
	AppendOnly bool
	// Salvage makes Open skip damaged entries in the middle of the log
	// instead of failing; Recovery reports what was skipped. It then reads
	// the record of every indexed message and sorted value to drop those
	// whose record is another's; a read that fails there for a reason
	// other than damage (an I/O error) fails the Open. It skips damage
	// and destroys nothing intact: a NAME.FRONT truncation marker from a
	// later moment than the snapshot it replays from (or than the older
	// snapshot it falls back to beside a damaged newest one), which would
	// remove intact segments that state needs, it refuses as an Open
	// without Salvage does (ErrLaterFront), changing nothing; moved out of
	// the log directory, every segment is kept. With ReadOnly it changes
	// the state in memory only, as the salvage would, and refuses what the
	// salvage refuses (see the package documentation).
	Salvage bool
	// Clock is the source of time. Default the system clock.
	Clock Clock
	// FileMode and DirMode are the permissions of created files and
	// directories. Default 0600 and 0700.
	FileMode, DirMode os.FileMode
	// Logger receives the queue's events: what Open repaired, background
	// failures and their recovery, leases that ran out, each message
	// dead-lettered by a settle or by a delivery that MaxDeliveries kept
	// from it, the log's sticky write error (Info and above), and
	// snapshots, compactions and copy-forward with their durations (Debug).
	// Sorted and windowed queues log each value dead-lettered by a batch's
	// dead-letter, a nack past MaxDeliveries or a pull that MaxDeliveries
	// kept from it ("queue: value dead-lettered", with its key and seq);
	// a value that a batch's lease running out dead-letters is not
	// logged one by one.
	// A Settle (Ack, Nack, DeadLetter and their batches), a batch's
	// DeadLetter or Nack, and a delivery or pull log the messages or values
	// they dead-lettered once their records are as durable as Sync
	// promises, and none when that write or fsync failed (the queue is
	// then poisoned): under SyncAlways a power loss never undoes a
	// dead-lettering so logged. A delivery or pull that dead-lettered on
	// its way does not wait for that: it returns once its leases and
	// those dead-letterings are written, and the housekeeping goroutine
	// logs them once durable (under SyncAlways it runs the fsync if no
	// other call's did), or Close, which waits for it. SettleAsync logs
	// its dead-letterings at once, before its Pending completes: a crash
	// may undo them, as it may undo the settle.
	// Nothing else is logged per message on the enqueue and delivery paths.
	// Every event is logged without the queue's lock held: the handler
	// may call the queue, but not Close on the goroutine that called it:
	// the background events (leases that ran out, background failures,
	// the sticky write error, compactions, the dead-letterings of
	// deliveries and pulls) are logged by the queue's
	// housekeeping goroutine, which Close waits for. A handler that
	// closes the queue starts Close on a goroutine of its own (Close on
	// the housekeeping goroutine returns ErrHousekeeper at once). The
	// housekeeping goroutine ends leases and compacts, and does neither
	// while a handler of a background event runs: a call the handler makes that
	// waits for a lease to run out (a Dequeue or Pull while the messages
	// are leased) waits until its context ends or Close, which ends it
	// with ErrClosed.
	// Default nil: no logging.
	Logger *slog.Logger
	// MaxPending bounds the records of asynchronous calls (EnqueueAsync,
	// SettleAsync, AckAsync) appended and not yet complete; such a call
	// blocks while the window is full. A SettleAsync of more settlements
	// than the window waits until none is in flight, then goes past it.
	// Default 4096.
	MaxPending int

	// ReadOnly opens the queue for inspection and writes nothing: no lock
	// file, no identity file, no torn tail cut, no lease of a crashed
	// process ended (with Salvage, in memory only, as the salvage ends
	// them), no snapshot at Close. Calls that would change the queue fail
	// with ErrReadOnly. Damage the writable open refuses it refuses too
	// (without Salvage): a log that ends before the snapshot's LSN
	// (records lost, not a torn tail), or that no longer reaches back to
	// a record the snapshot's messages need. It opens beside a process
	// that has the queue open, reading the files as that process last
	// wrote them (Queue.InUse); when that process's compaction cuts the
	// log under the read it reads again, and a queue that compacts under
	// every one of many reads fails the open with ErrLocked, never
	// ErrCorrupt. Opened while no process has the queue open, it holds
	// the directory's lock shared until Close, so that no queue starts
	// writing under its reads: an Open for writing meanwhile, from any
	// process, fails with ErrLocked unless its LockTimeout outlasts the
	// read (close a long-lived handle, or open it after the writer). It
	// takes a queue of any kind unless opened through OpenSorted or
	// OpenWindowed.
	ReadOnly bool
	// LockTimeout is how long an Open for writing (and Repair) waits for
	// the directory's lock while another holds it: a process that has the
	// queue open and is closing it, or a read-only handle, ReadLog, Verify
	// or a walq command that took it shared while it reads. Default 0:
	// the open fails with ErrLocked at once. A service that may restart
	// while an operator's `walq stats` or `walq dump` reads its queue
	// gives it a few seconds. A read-only open never waits: it reads
	// beside the holder.
	LockTimeout time.Duration
	// FS is the file system the queue works through (see wal.FS); nil
	// means the real one. Crash and fault tests pass their own. The
	// snapshots and the identity file are written and read through it,
	// and the log's segment files are read, fsynced, listed, cut and
	// removed through it, a read-only open and the probe that infers the
	// kind of a directory without an identity file included. The calls
	// of tidwall/wal, which writes the segment files, are not: it makes
	// them with package os, out of FS's sight. They are the appends to
	// the segment files, the creation of a new one at a roll, and, as
	// the log opens for writing, its own listing of the log directory,
	// its read of the last segment and, in an empty log, the creation of
	// the first. FS is told of each append before it is made (wal.FS's
	// StoreOp) and may fail it, and every fsync the queue counts on goes
	// through FS, so an FS that keeps only what was fsynced through it
	// decides what of the log survives a crash. The directory's lock file is
	// taken through the real file system. Repair reads and writes
	// through RepairOptions.Options.FS, Verify reads through
	// VerifyOptions.FS; ReadLog, which takes no options, reads through
	// the real file system.
	FS wal.FS

	// ident is what the directory must hold; set by OpenSorted and
	// OpenWindowed (zero: an ack queue, or any kind when ReadOnly).
	ident Identity

	singleFlight       bool              // sorted queues: set from SortedOptions
	cacheBytes         int64             // sorted queues: set from SortedOptions
	snapshotStep       func(step string) // called after each step of writing a snapshot; see internal/testhook
	compactStep        func(step string) // called at each point of a compaction's copies; see internal/testhook
	manualCompact      bool              // no background compaction, only Compact; see internal/testhook
	logOptions         func(walOpts any) // edits the log's wal.Options; see internal/testhook
	segmentSizeDefault bool              // SegmentSize was not given: the default filled in (logSegmentSize)
	wallResync         time.Duration     // how long the system clock's base is used; 0: wallResync (white-box tests hold a stepped base)

	// release releases the directory's lock; nil: unlockDir (white-box
	// tests make it fail).
	release func(*dirLock) error
}

// The crash tests' way to snapshotStep, which is not part of the API.
func init() {
	testhook.SetSnapshotStep = func(o any, step func(string)) { o.(*Options).snapshotStep = step }
	testhook.SetCompactStep = func(o any, step func(string)) { o.(*Options).compactStep = step }
	testhook.SetManualCompaction = func(o any) { o.(*Options).manualCompact = true }
	testhook.SetLogOptions = func(o any, edit func(any)) { o.(*Options).logOptions = edit }
	testhook.FlushLog = func(q any) error { return q.(logOwner).logOf().Flush() }
}

// logOwner is a queue of any form (Queue, Sorted, Windowed), whose log a
// crash test reaches through testhook.FlushLog.
type logOwner interface{ logOf() *wal.Log }

func (q *Queue) logOf() *wal.Log     { return q.log }
func (s *Sorted[K]) logOf() *wal.Log { return s.q.log }

// MaxMessageSizeLimit is the largest MaxMessageSize accepted, by every
// engine alike (the Redis engine's too), so that a size one accepts the
// other does not refuse.
const MaxMessageSizeLimit = 1 << 30

// withDefaults returns a validated copy of o with defaults filled in.
func (o *Options) withDefaults() (Options, error) {
	var c Options
	if o != nil {
		c = *o
	}
	fill := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	fill(&c.AckTimeout, 30*time.Second)
	fill(&c.SyncInterval, 50*time.Millisecond)
	if c.MaxDeliveries == 0 {
		c.MaxDeliveries = 10
	}
	if c.MaxMessageSize == 0 {
		c.MaxMessageSize = 4 << 20
	}
	if c.SegmentSize == 0 {
		c.SegmentSize, c.segmentSizeDefault = 4<<20, true
	}
	if c.SnapshotBytes == 0 {
		c.SnapshotBytes = 64 << 20
	}
	if c.MaxPending == 0 {
		c.MaxPending = 4096
	}
	if c.FileMode == 0 {
		c.FileMode = 0o600
	}
	if c.DirMode == 0 {
		c.DirMode = 0o700
	}
	if c.Clock == nil {
		c.Clock = systemClock{}
	}
	return c, c.validate()
}

func (o *Options) validate() error {
	switch {
	case o.AckTimeout < 0:
		return fmt.Errorf("%w: AckTimeout %v is negative", ErrInvalidOptions, o.AckTimeout)
	case o.SyncInterval < 0:
		return fmt.Errorf("%w: SyncInterval %v is negative", ErrInvalidOptions, o.SyncInterval)
	case o.DedupWindow < 0:
		return fmt.Errorf("%w: DedupWindow %v is negative", ErrInvalidOptions, o.DedupWindow)
	case o.Sync > SyncNever:
		return fmt.Errorf("%w: unknown Sync mode %d", ErrInvalidOptions, o.Sync)
	case o.MaxMessageSize < 0 || o.MaxMessageSize > MaxMessageSizeLimit:
		return fmt.Errorf("%w: MaxMessageSize %d out of range", ErrInvalidOptions, o.MaxMessageSize)
	case o.SegmentSize < 4096:
		return fmt.Errorf("%w: SegmentSize %d below 4096", ErrInvalidOptions, o.SegmentSize)
	case o.MaxPending < 0:
		return fmt.Errorf("%w: MaxPending %d is negative", ErrInvalidOptions, o.MaxPending)
	case o.SnapshotBytes < 0:
		return fmt.Errorf("%w: SnapshotBytes %d is negative", ErrInvalidOptions, o.SnapshotBytes)
	case o.LockTimeout < 0:
		return fmt.Errorf("%w: LockTimeout %v is negative", ErrInvalidOptions, o.LockTimeout)
	}
	return nil
}

// unlock releases the directory's lock l the way o says: with
// o.release, else unlockDir. A nil l (none taken) is released at once.
func (o *Options) unlock(l *dirLock) error {
	if o.release != nil {
		return o.release(l)
	}
	return unlockDir(l)
}

// fs returns the file system the queue works through.
func (o *Options) fs() wal.FS {
	if o.FS == nil {
		return wal.OSFS{}
	}
	return o.FS
}

// logSegmentSize is the SegmentSize a salvaging or read-only open passes
// its log: the one given, or none (the log's default, the same 4 MiB)
// when it was not. The log tells a roll a crash tore at an entry boundary
// from a missing segment by the size at which the queue's writer sealed
// its segments; the default need not be that size (a tool's open of a
// queue an application configured), and a size taken wrongly larger
// would let a missing segment pass for a torn roll.
func (o *Options) logSegmentSize() int64 {
	if o.segmentSizeDefault && (o.Salvage || o.ReadOnly) {
		return 0
	}
	return o.SegmentSize
}
