// Package seglayout lists the entries of a log's segment files as the
// README's on-disk format draws them, without package wal's code, for
// tests that check what is on disk or damage it at exact places:
//
//	DIR/log/<20-digit index>   a segment, named by its first index
//	segment: | uvarint(len(entry)) | entry | uvarint(len(entry)) | entry | ... | zeros (the tail only) |
//	entry:   | CRC-32C (4B LE) | Version (1B) | First LSN (8B LE) | Count (4B LE) | Synced LSN (8B LE, version 2) | records |
//
// It reads the framing and the First LSN and Count of each entry's
// header, the same in versions 1 and 2; it checks neither the CRC nor
// the version, so that a test can find a damaged entry's place. An entry
// with Count 0 is a witness. Its functions only read files and are safe
// for concurrent use.
//
// Usage:
//
//	entries, err := seglayout.Dir(filepath.Join(queueDir, "log"))
//	for _, e := range entries { // e.Seg, e.Off, e.Size, e.First, e.Count
//	}
package seglayout
