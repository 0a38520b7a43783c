package fuzz_test

import (
	"encoding/binary"
	"hash/crc32"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// This file reads and writes the log's on-disk format as wal/doc.go draws
// it, so that the tests can cut, damage and forge entries at exact places:
//
//	frame: | uvarint(len(entry)) | entry |
//	entry: | CRC-32C (4B LE) | Version (1B) = 2 | First LSN (8B LE) | Count (4B LE) |
//	       | Synced LSN (8B LE) | Count × ( uvarint(len(record)) | record ) |
//
// and version 1, read but no longer written, without Synced LSN. A
// version-2 entry with Count 0 is a witness: no record, no LSN.

const (
	entryHeader1 = 17 // version 1
	entryHeader  = 25 // version 2, the one written
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// entryInfo is one whole entry of a segment file.
type entryInfo struct {
	off, end int64    // the frame's first byte and the byte after it
	first    uint64   // LSN of its first record
	count    int      // records
	synced   uint64   // its Synced LSN (version 2; 0 for version 1)
	recs     [][]byte // the records, sharing the file's bytes
}

// lastLSN is the LSN of the entry's last record.
func (e entryInfo) lastLSN() uint64 { return e.first + uint64(e.count) - 1 }

// parseSegment returns the valid entries that hold records at the front of
// a segment file, passing over witnesses (Count 0) as the log's readers
// do; it stops at the first frame that fails a check.
func parseSegment(b []byte) []entryInfo {
	var out []entryInfo
	for off := 0; off < len(b); {
		n, k := binary.Uvarint(b[off:])
		if k <= 0 || n < entryHeader1 || n > uint64(len(b)-off-k) {
			break
		}
		e := b[off+k : off+k+int(n)]
		info, ok := parseEntry(e)
		if !ok {
			break
		}
		info.off, info.end = int64(off), int64(off+k+int(n))
		if info.count > 0 {
			out = append(out, info)
		}
		off += k + int(n)
	}
	return out
}

// parseEntry checks an entry's CRC, version and record framing.
func parseEntry(e []byte) (entryInfo, bool) {
	if binary.LittleEndian.Uint32(e) != crc32.Checksum(e[4:], castagnoli) {
		return entryInfo{}, false
	}
	hdr := entryHeader1
	switch {
	case e[4] == 2 && len(e) >= entryHeader:
		hdr = entryHeader
	case e[4] != 1:
		return entryInfo{}, false
	}
	info := entryInfo{first: binary.LittleEndian.Uint64(e[5:]), count: int(binary.LittleEndian.Uint32(e[13:]))}
	if hdr == entryHeader {
		info.synced = binary.LittleEndian.Uint64(e[17:])
	}
	body := e[hdr:]
	for i := 0; i < info.count; i++ {
		n, k := binary.Uvarint(body)
		if k <= 0 || n > uint64(len(body)-k) {
			return entryInfo{}, false
		}
		info.recs = append(info.recs, body[k:k+int(n)])
		body = body[k+int(n):]
	}
	return info, len(body) == 0 && (info.count > 0 || hdr == entryHeader)
}

// frameEntry returns the framed bytes of a version-2 entry holding recs,
// numbered from first, written when the log was durable up to synced,
// with a correct CRC.
func frameEntry(first, synced uint64, recs [][]byte) []byte {
	e := make([]byte, entryHeader)
	for _, r := range recs {
		e = binary.AppendUvarint(e, uint64(len(r)))
		e = append(e, r...)
	}
	e[4] = 2
	binary.LittleEndian.PutUint64(e[5:], first)
	binary.LittleEndian.PutUint32(e[13:], uint32(len(recs)))
	binary.LittleEndian.PutUint64(e[17:], synced)
	binary.LittleEndian.PutUint32(e, crc32.Checksum(e[4:], castagnoli))
	out := binary.AppendUvarint(nil, uint64(len(e)))
	return append(out, e...)
}

// segmentFiles returns the relative paths of the log segments in a
// directory image, oldest first.
func segmentFiles(files map[string][]byte) []string {
	var out []string
	for p := range files {
		if isSegment(p) {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}

// isSegment reports whether a relative path names a log segment file.
func isSegment(rel string) bool {
	dir, name := filepath.Split(rel)
	return filepath.Clean(dir) == "log" && len(name) == 20 && strings.Trim(name, "0123456789") == ""
}

// snapshotFiles returns the relative paths of the snapshot files in a
// directory image, oldest first.
func snapshotFiles(files map[string][]byte) []string {
	var out []string
	for p := range files {
		if strings.HasPrefix(p, "snapshot-") && strings.HasSuffix(p, ".snap") {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}

// segmentPaths returns the segment files of a queue directory on disk.
func segmentPaths(dir string) []string {
	m, _ := filepath.Glob(filepath.Join(dir, "log", strings.Repeat("[0-9]", 20)))
	sort.Strings(m)
	return m
}

// fileSize returns the size of a file, or -1.
func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return -1
	}
	return fi.Size()
}
