// Package recovery writes and loads walq's snapshots and runs the recovery
// procedure that opens a queue directory: the snapshot, the replay of the
// log after it, and the requeue of the leases a crashed process left.
//
// # Procedure
//
// Recover runs it for a Target, which defines the State that records
// rebuild (walq's queue: its indexes, cursor and counters) and what
// ending a lease appends; recovery never sees a record's fields. Opening a
// queue directory is:
//
//  1. Load the newest snapshot (Load): its body decoded by the Target, which
//     must reflect the LSN in the file's name. A snapshot that fails its
//     checks is ErrCorrupt, never silently skipped: the log before it may
//     already be gone. A salvage sets it aside (Report.SnapshotLost,
//     LoadSalvaging) and, once the log is open, starts from the newest
//     older snapshot that passes the checks (LoadOlder), so that what the
//     damaged one held (acked producer ids among it) is rebuilt by the
//     replay; only without one from an empty state. A log that no longer
//     continues that snapshot (its LSN+1 before the log's first LSN: front
//     segments lost) does not set it aside too: what it holds of acked
//     ids, deliveries and dead letters is still true, and the lost front
//     is step 3's, as after a sound snapshot (its messages whose records
//     went with the front are reported lost, never delivered). The older
//     snapshot stays on disk until a snapshot taken after the salvage,
//     which holds what it held, less what is reported lost, supersedes
//     it. A read-only preview of the salvage calls both too.
//  2. Open the log (Target.OpenLog, package wal), which cuts a torn tail.
//     It must reach the snapshot's LSN: a log that ends before it lost
//     synced records.
//  3. Check that the log reaches back to the snapshot and to the oldest
//     record its messages need (Coverage): a lost front segment is
//     ErrLogMissing. A salvage notes where the log starts
//     (Report.LostBefore) and replays from there.
//  4. Replay every record after the snapshot into the state. A salvage
//     skips the records that no longer apply because others were lost.
//  5. Install the state. If the last record replayed is not a clean close
//     (or a salvage lost anything), the process before crashed and its
//     consumers died with it: every lease ends now (Target.EndLeases),
//     keeping its delivery count, so a message that crashes its consumer
//     reaches the dead-letter set after MaxDeliveries crashes (the queue
//     dead-letters one past its limit when it would next deliver it too,
//     so this holds across an open that applied no limit).
//  6. After a salvage, copy what lives in the damaged segments past them
//     and cut them off (Target.CopyPast), so the damage is gone from disk.
//     The copy also rewrites what the replay could only note: a message
//     whose first lease the damage took, which the replayed cursor passed
//     or a surviving ack or dead-letter settled, is copied forward as
//     ready or dead, or left behind as acked.
//
// The salvage steps sit in salvage.go; the log's own (damaged entries
// skipped, the torn tail cut) are package wal's.
//
// Taking a snapshot is:
//
//  1. The caller freezes its state (constant-time btree clones) and notes
//     the LSN of the last record that state reflects, then makes the log
//     durable up to that LSN.
//  2. Write encodes the body to a temporary file, fsyncs it, renames it to
//     snapshot-<LSN>.snap, fsyncs the directory, then removes older
//     snapshots and fsyncs the directory again.
//  3. The caller truncates the log front below the snapshot's LSN and the
//     oldest position its state still needs.
//
// A crash between any two steps leaves either the old snapshot or the new
// one, each consistent with the log.
//
// # Snapshot file format
//
//	| Magic "WALQSNAP" (8B) | Version (1B) = 1 | CRC-32C (4B, little endian) |
//	| LSN (8B, little endian) | Body length (8B, little endian) | Body |
//
// The CRC-32C (Castagnoli) covers LSN, body length and body. The body is
// opaque here (walq's queue writes msgpack). These constants are part of the
// file format and must not be changed; testdata/snapshot.golden pins them.
//
// # Concurrency
//
// Write and Latest may run while the log is being appended to; two Writes
// to one directory must not run at once (the queue has one compactor).
// Recover runs before anything else uses the directory, and calls its
// Target and State from one goroutine.
package recovery
