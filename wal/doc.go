// Package wal is walq's write-ahead log: a sequence of records, each with a
// log sequence number (LSN), stored in segment files written through
// github.com/tidwall/wal and framed so that every byte is checked.
//
// # Guarantees
//
//   - Records are numbered 1, 2, 3, … in the order Append was called; an LSN
//     is never reused, and it is stable across restarts, repairs and
//     truncation.
//   - Group commit: records appended while the previous group was being
//     written form the next group, which is written as one log entry with
//     one CRC and, under SyncAlways, covered by one fsync. Commit.Wait
//     returns only after the fsync that covers its record.
//   - A failed write or fsync poisons the Log: the error is sticky, every
//     later Append and Wait returns it, and nothing is retried and trusted
//     (the kernel may have dropped the dirty pages).
//   - Every segment create, rename and remove is followed by an fsync of the
//     directory.
//   - On Open a torn or zero-filled tail of the last segment is cut back to
//     the last whole entry, but only when no valid entry follows the damage;
//     the cut is reported by Report. Damage anywhere else is ErrCorrupt,
//     wrapped with the segment, the byte offset and the entry index, unless
//     Options.Salvage is set, in which case the damaged entries are skipped
//     and each skip is reported.
//
// # Sync modes and what a crash can lose
//
//   - SyncAlways (default): nothing whose Wait returned nil is lost.
//   - SyncInterval: groups are written at once and fsynced at most every
//     Options.SyncInterval; a power loss can lose the records of the last
//     interval. A process crash (kill -9) loses nothing that was written.
//   - SyncNever: fsync only at segment roll-over and Close; a power loss can
//     lose everything since the last roll-over; a process crash loses
//     nothing that was written.
//
// # On-disk format
//
// A log directory holds segment files named by the 20-digit tidwall/wal
// index of their first entry (00000000000000000001, …). tidwall/wal frames
// each entry as
//
//	| uvarint(len(entry)) | entry (len bytes) |
//
// and walq's entry (one commit group) is
//
//	| CRC-32C (4B, little endian) | Version (1B) = 1 |
//	| First LSN (8B, little endian) | Count (4B, little endian) |
//	| Count × ( uvarint(len(record)) | record ) |
//
// The CRC-32C (Castagnoli) covers every byte after itself. The records of an
// entry have LSNs First LSN … First LSN+Count-1, and the First LSN of an
// entry is the First LSN plus Count of the entry before it. These constants
// are part of the wire format and must not be changed; testdata/entry.golden
// pins them.
//
// # Concurrency
//
// A Log is safe for concurrent use. Append only copies the record into the
// open group under a short mutex, so callers may call it while holding their
// own lock, which is how they fix the order of their records. One committer
// goroutine owns the tidwall/wal handle; it writes groups, fsyncs, rolls and
// truncates segments. Readers never call tidwall/wal's Read (it mutates a
// shared cache under a read lock): they pread the segment files themselves,
// and only up to the bytes the committer has finished writing. A Reader is
// not safe for concurrent use; create one per goroutine.
package wal
