// Package recovery writes and loads walq's snapshots and replays the log
// after them.
//
// # Procedure
//
// Opening a queue directory is:
//
//  1. Load the newest snapshot (Latest). A snapshot whose checksum fails is
//     ErrCorrupt, never silently skipped: the log before it may already be
//     gone.
//  2. Open the log (package wal), which repairs a torn tail.
//  3. Replay every record after the snapshot's LSN into the indexes.
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
package recovery
