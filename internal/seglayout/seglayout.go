package seglayout

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
)

// ErrBadFrame is returned when a segment holds a frame that is not a
// whole entry: a length that runs past the file, or an entry shorter
// than its header.
var ErrBadFrame = errors.New("seglayout: bad frame")

// Entry is one entry of a segment file, where it lies and what it holds.
type Entry struct {
	Seg   string // the segment file
	Off   int64  // the frame's first byte in Seg
	Size  int64  // the frame's bytes: the uvarint and the entry
	Hdr   int64  // the uvarint's bytes: the entry starts at Off+Hdr
	First uint64 // LSN of its first record (a witness: of the next record)
	Count int    // records; 0 for a witness
}

// headerMin is the shortest entry header: CRC, version, first LSN and
// count (version 1; version 2 adds a Synced LSN).
const headerMin = 17

// segmentNameLen is the length of a segment file's name: its first
// index, zero-padded to 20 digits, so that the names sort in log order.
const segmentNameLen = 20

// isSegmentName reports whether name is a segment file's: 20 digits.
func isSegmentName(name string) bool {
	if len(name) != segmentNameLen {
		return false
	}
	for _, c := range name {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// Dir returns the entries of every segment file in dir, in log order.
func Dir(dir string) ([]Entry, error) {
	segs, err := Segments(dir)
	if err != nil {
		return nil, err
	}
	var out []Entry
	for _, seg := range segs {
		es, err := Segment(seg)
		if err != nil {
			return nil, err
		}
		out = append(out, es...)
	}
	return out, nil
}

// Segments returns the paths of the segment files in dir, in log order.
func Segments(dir string) ([]string, error) {
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, de := range des {
		if isSegmentName(de.Name()) {
			out = append(out, filepath.Join(dir, de.Name()))
		}
	}
	sort.Strings(out)
	return out, nil
}

// Segment returns the entries of the segment file at path, in order, up
// to the zeros that follow the last one while the segment is the log's
// tail.
func Segment(path string) ([]Entry, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []Entry
	for off := 0; off < len(b) && bytes.ContainsFunc(b[off:], func(r rune) bool { return r != 0 }); {
		n, k := binary.Uvarint(b[off:])
		if k <= 0 || n < headerMin || n > uint64(len(b)-off-k) {
			return nil, fmt.Errorf("%w in %s at offset %d", ErrBadFrame, path, off)
		}
		e := b[off+k : off+k+int(n)]
		out = append(out, Entry{Seg: path, Off: int64(off), Size: int64(k) + int64(n), Hdr: int64(k),
			First: binary.LittleEndian.Uint64(e[5:]), Count: int(binary.LittleEndian.Uint32(e[13:]))})
		off += k + int(n)
	}
	return out, nil
}
