// Package testhook reaches the test hooks of package queue, which are not
// part of its API: walq's own crash tests install them, and no other
// module can import an internal package.
package testhook

// SetSnapshotStep installs step on opts, which must be a *queue.Options:
// the queue calls step after each step of writing a snapshot ("written",
// "synced", "renamed", "dir-synced", "removed"), so that a crash test can
// copy the directory or stop the process there. Package queue sets this
// function when it is initialized; it is never changed after that.
var SetSnapshotStep func(opts any, step func(string))

// SetCompactStep installs step on opts, which must be a *queue.Options:
// a compaction calls step at each point of copying live messages forward
// ("copy" after each indexed message's copy is appended, "indexed" once
// they all are, "cursor-copy" after each never-delivered message's copy
// and "copied" after the last of a chunk, both with the queue's lock held
// and before the record that advances the cursor past them, "advanced"
// once that record is appended, "flushed" once the copies are durable)
// and "truncated" after any snapshot's front truncation, so that a crash
// test can stop the process between the copies, the advance and the
// truncation. Package queue sets this function when it is initialized.
var SetCompactStep func(opts any, step func(string))

// SetManualCompaction turns off the background compaction of opts, which
// must be a *queue.Options: the queue compacts only when Compact is
// called, so that a crash test's own compactions are the ones that
// truncate. Package queue sets this function when it is initialized.
var SetManualCompaction func(opts any)

// PlantLogBug plants the durability bug named name ("early-durable",
// "no-roll-dir-sync", "no-seal-sync") in opts, which must be a
// *wal.Options, so that a crash test can show it catches the bug. Package
// wal sets this function when it is initialized.
var PlantLogBug func(opts any, name string)

// SetLogOptions installs edit on opts, which must be a *queue.Options: the
// queue calls it on the *wal.Options it opens its log with (as an any), so
// that a crash test can plant a bug there (PlantLogBug). Package queue sets
// this function when it is initialized.
var SetLogOptions func(opts any, edit func(walOpts any))

// FlushLog makes everything the log of q holds durable and writes a
// witness of it, as wal.Log.Flush does; q must be a *queue.Queue,
// *queue.Sorted[K] or *queue.Windowed. A crash test that calls it after each
// call of its workload gives the fsyncs, and the witness entries, a place
// that timing does not move: without it, records a call leaves unsynced
// (a dequeue's lease) may be fsynced in the background or with the next
// call's, and a witness is written only if the log stays idle for a
// moment after an fsync. Package queue sets this function when it is
// initialized.
var FlushLog func(q any) error
