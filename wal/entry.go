package wal

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// Entry layout (one commit group; see doc.go). Version 2, written by this
// package:
//
//	| CRC-32C (4B LE) | Version=2 (1B) | First LSN (8B LE) | Count (4B LE) |
//	| Synced LSN (8B LE) | Count × ( uvarint(len(record)) | record ) |
//
// Version 1, read but no longer written, has no Synced LSN:
//
//	| CRC-32C (4B LE) | Version=1 (1B) | First LSN (8B LE) | Count (4B LE) |
//	| Count × ( uvarint(len(record)) | record ) |
//
// The CRC covers every byte after it. Synced LSN is the log's DurableLSN
// when the entry's write was issued: every record up to it had been
// fsynced, and that fsync had returned, before the write began (0 when none
// had). The repair tells a torn write from damage by it (repair.go).
//
// A version-2 entry with Count 0 is a witness (witness.go): it holds no
// record and takes no LSN (First LSN is the LSN the next record gets, so
// its end is its first), and exists only to carry a Synced LSN that an
// fsync raised after the last entry was written. A 25-byte entry:
//
//	| CRC-32C (4B LE) | Version=2 (1B) | First LSN (8B LE) | Count=0 (4B LE) |
//	| Synced LSN (8B LE) |
//
// Version 1 has no witness: Count 0 is damage there.
//
// tidwall/wal stores each entry as | uvarint(len(entry)) | entry |.
//
// These constants are part of the wire format and must not be changed;
// testdata/entry.golden (version 1), testdata/entry-v2.golden and
// testdata/entry-witness.golden pin them.
const (
	entryVersion1 = 1              // read, never written
	entryVersion2 = 2              // written since entries carry their Synced LSN
	entryVersion  = entryVersion2  // the version this package writes
	offVersion    = 4              // after the CRC
	offFirstLSN   = 5              // after the version
	offCount      = 13             // after the first LSN
	offSyncedLSN  = 17             // after the count (version 2)
	headerSize1   = 17             // version 1: CRC + version + first LSN + count
	headerSize2   = 25             // version 2: version 1's + synced LSN
	headerSize    = headerSize1    // the smallest header of any version: the lower bound of a frame
	maxHeaderSize = headerSize2    // the largest header of any version
	syncedUnknown = LSN(1<<64 - 1) // the Synced LSN of a version-1 entry: it tells nothing
)

// headerLen returns the header size of an entry of version v, or 0 for a
// version this package does not read.
func headerLen(v byte) int {
	switch v {
	case entryVersion1:
		return headerSize1
	case entryVersion2:
		return headerSize2
	}
	return 0
}

// castagnoli is the CRC-32C table; read-only after package init.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// entryHeader is the decoded fixed part of an entry.
type entryHeader struct {
	first   LSN    // LSN of the entry's first record
	count   uint32 // records in the entry; > 0 but in a witness (version 2 only)
	synced  LSN    // DurableLSN when the entry was written; syncedUnknown for version 1
	version byte   // entryVersion1 or entryVersion2; 0 in a header not decoded (written as entryVersion)
}

// size returns the length of the entry's header: its records follow it.
func (h entryHeader) size() int {
	if h.version == entryVersion1 {
		return headerSize1
	}
	return headerSize2
}

// end returns the LSN just after the entry's last record.
func (h entryHeader) end() LSN { return h.first + LSN(h.count) }

// witness reports whether the entry holds no record: a witness of the
// log's DurableLSN (witness.go).
func (h entryHeader) witness() bool { return h.count == 0 }

// contains reports whether lsn is one of the entry's records.
func (h entryHeader) contains(lsn LSN) bool { return lsn >= h.first && lsn < h.end() }

// formatError is the reason why bytes are not a valid frame or entry.
type formatError string

func (e formatError) Error() string { return string(e) }

// Reasons for rejecting a frame or an entry.
const (
	errShortFrame   formatError = "frame runs past the end of the file"
	errZeroFrame    formatError = "zero-length frame"
	errBadFrameLen  formatError = "unreadable frame length"
	errShortEntry   formatError = "entry shorter than its header"
	errBadCRC       formatError = "CRC mismatch"
	errZeroCount    formatError = "entry with zero records"
	errBadRecord    formatError = "record framing does not match the count"
	errLSNOutOfLine formatError = "LSN discontinuity"
)

// versionErrors holds, for each version byte, the reason an entry with
// it is rejected (a formatError), made and boxed once: the repair's
// searches try a header at every byte offset of a damaged region, most of
// them with a wrong version.
var versionErrors = func() (errs [256]error) {
	for v := range errs {
		errs[v] = formatError(fmt.Sprintf("unsupported version %d", v))
	}
	return errs
}()

// newEntry returns an empty entry in dst's storage with room for the
// header of the version written.
func newEntry(dst []byte) []byte {
	return append(dst[:0], make([]byte, headerSize2)...)
}

// appendRecord appends one record to an entry started with newEntry.
func appendRecord(e, rec []byte) []byte {
	e = binary.AppendUvarint(e, uint64(len(rec)))
	return append(e, rec...)
}

// appendJoinedRecord is appendRecord for a record of n bytes made of
// parts, joined in order.
func appendJoinedRecord(e []byte, n int, parts [][]byte) []byte {
	e = binary.AppendUvarint(e, uint64(n))
	for _, p := range parts {
		e = append(e, p...)
	}
	return e
}

// recordSize is the number of bytes appendRecord adds for a record of n bytes.
func recordSize(n int) int { return uvarintLen(uint64(n)) + n }

// sealEntry writes the header (version 2, h.synced its Synced LSN) and the
// CRC into an entry built by newEntry and appendRecord.
func sealEntry(e []byte, h entryHeader) {
	e[offVersion] = entryVersion2
	binary.LittleEndian.PutUint64(e[offFirstLSN:], h.first)
	binary.LittleEndian.PutUint32(e[offCount:], h.count)
	binary.LittleEndian.PutUint64(e[offSyncedLSN:], h.synced)
	binary.LittleEndian.PutUint32(e, crc32.Checksum(e[offVersion:], castagnoli))
}

// encodeEntry builds a sealed entry holding recs, numbered from first,
// written when the log was durable up to synced.
func encodeEntry(first, synced LSN, recs [][]byte) []byte {
	e := newEntry(nil)
	for _, r := range recs {
		e = appendRecord(e, r)
	}
	sealEntry(e, entryHeader{first: first, count: uint32(len(recs)), synced: synced})
	return e
}

// peekHeader decodes the header of either version without checking the
// CRC; it rejects what can be rejected cheaply (length, version, a zero
// count in version 1, where no witness exists).
func peekHeader(e []byte) (entryHeader, error) {
	if len(e) < headerSize1 {
		return entryHeader{}, errShortEntry
	}
	v := e[offVersion]
	n := headerLen(v)
	if n == 0 {
		return entryHeader{}, versionErrors[v]
	}
	if len(e) < n {
		return entryHeader{}, errShortEntry
	}
	h := entryHeader{
		first:   binary.LittleEndian.Uint64(e[offFirstLSN:]),
		count:   binary.LittleEndian.Uint32(e[offCount:]),
		synced:  syncedUnknown,
		version: v,
	}
	if v == entryVersion2 {
		h.synced = binary.LittleEndian.Uint64(e[offSyncedLSN:])
	}
	if h.count == 0 && v == entryVersion1 {
		return entryHeader{}, errZeroCount
	}
	return h, nil
}

// decodeEntry checks an entry completely (CRC, version, count, record
// framing) and returns its header. The records follow e[h.size():].
func decodeEntry(e []byte) (entryHeader, error) {
	if len(e) < headerSize1 {
		return entryHeader{}, errShortEntry
	}
	if binary.LittleEndian.Uint32(e) != crc32.Checksum(e[offVersion:], castagnoli) {
		return entryHeader{}, errBadCRC
	}
	h, err := peekHeader(e)
	if err != nil {
		return h, err
	}
	return h, checkRecords(e[h.size():], h.count)
}

// checkRecords reports whether body holds exactly count framed records.
func checkRecords(body []byte, count uint32) error {
	for i := uint32(0); i < count; i++ {
		var err error
		if _, body, err = nextRecord(body); err != nil {
			return err
		}
	}
	if len(body) != 0 {
		return errBadRecord
	}
	return nil
}

// nextRecord splits the first record off an entry body.
func nextRecord(body []byte) (rec, rest []byte, err error) {
	n, k := binary.Uvarint(body)
	if k <= 0 || n > uint64(len(body)-k) {
		return nil, nil, errBadRecord
	}
	end := k + int(n)
	return body[k:end:end], body[end:], nil
}

// appendFrame frames an entry the way tidwall/wal's binary format does.
func appendFrame(dst, e []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(e)))
	return append(dst, e...)
}

// frameSize is the number of bytes tidwall/wal writes for an entry of n bytes.
func frameSize(n int) int64 { return int64(uvarintLen(uint64(n)) + n) }

// decodeFrame reads a frame header from b, the bytes at the frame's start;
// avail is how many bytes the file holds from there on. It returns the
// header length and the entry length.
func decodeFrame(b []byte, avail int64) (hdr int, size int64, err error) {
	n, k := binary.Uvarint(b)
	switch {
	case k == 0 && int64(len(b)) >= avail:
		return 0, 0, errShortFrame // the varint itself is cut off
	case k <= 0:
		return 0, 0, errBadFrameLen
	case n == 0:
		return 0, 0, errZeroFrame
	case n > uint64(avail-int64(k)):
		return 0, 0, errShortFrame
	}
	return k, int64(n), nil
}

func uvarintLen(x uint64) int {
	n := 1
	for ; x >= 0x80; x >>= 7 {
		n++
	}
	return n
}
