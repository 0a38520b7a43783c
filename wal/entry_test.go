package wal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/entry.golden")

// goldenRecords is the entry pinned by testdata/entry.golden: LSNs 42-44.
var goldenRecords = [][]byte{[]byte("alpha"), {}, []byte("gamma-\x00\xff")}

// TestEntryGolden pins the wire format: a framed entry as tidwall/wal
// stores it, byte for byte.
func TestEntryGolden(t *testing.T) {
	got := appendFrame(nil, encodeEntry(42, goldenRecords))
	path := filepath.Join("testdata", "entry.golden")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("entry bytes changed; the format is frozen.\n got %x\nwant %x", got, want)
	}
}

// TestSegmentFileBytes checks that a log's segment file is exactly the
// framed entries: one Append, one entry, nothing else.
func TestSegmentFileBytes(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(dir, &Options{StartLSN: 42})
	if err != nil {
		t.Fatal(err)
	}
	_, c, err := l.Append(goldenRecords[0])
	if err != nil || c.Wait() != nil {
		t.Fatalf("Append: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, "00000000000000000001"))
	if err != nil {
		t.Fatal(err)
	}
	if want := appendFrame(nil, encodeEntry(42, goldenRecords[:1])); !bytes.Equal(got, want) {
		t.Fatalf("segment bytes\n got %x\nwant %x", got, want)
	}
}

func TestEntryRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name  string
		first LSN
		recs  [][]byte
	}{
		{"one empty record", 1, [][]byte{{}}},
		{"golden", 42, goldenRecords},
		{"large record", 7, [][]byte{bytes.Repeat([]byte{0xab}, 300)}},
		{"many records", 1 << 40, bytes.Split(bytes.Repeat([]byte("x,"), 1000), []byte(","))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := encodeEntry(tc.first, tc.recs)
			h, err := decodeEntry(e)
			if err != nil || h.first != tc.first || int(h.count) != len(tc.recs) {
				t.Fatalf("decodeEntry = %+v, %v", h, err)
			}
			body := e[headerSize:]
			for i, want := range tc.recs {
				var rec []byte
				if rec, body, err = nextRecord(body); err != nil || !bytes.Equal(rec, want) {
					t.Fatalf("record %d = %q, %v; want %q", i, rec, err, want)
				}
			}
			d := newDecodedEntry(h, e)
			for i, want := range tc.recs {
				if got := d.record(tc.first + LSN(i)); !bytes.Equal(got, want) {
					t.Fatalf("decodedEntry.record(%d) = %q, want %q", i, got, want)
				}
			}
		})
	}
}

func TestDecodeEntryMalformed(t *testing.T) {
	good := encodeEntry(9, goldenRecords)
	mod := func(f func(e []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	reseal := func(e []byte) []byte { // fix the CRC after a change, to reach later checks
		h := entryHeader{first: binary.LittleEndian.Uint64(e[offFirstLSN:]), count: binary.LittleEndian.Uint32(e[offCount:])}
		v := e[offVersion]
		sealEntry(e, h)
		e[offVersion] = v
		binary.LittleEndian.PutUint32(e, crcOf(e))
		return e
	}
	for _, tc := range []struct {
		name string
		e    []byte
		want error
	}{
		{"empty", nil, errShortEntry},
		{"header cut", good[:headerSize-1], errShortEntry},
		{"body cut", good[:len(good)-1], errBadCRC},
		{"bit flip in payload", mod(func(e []byte) []byte { e[len(e)-1] ^= 1; return e }), errBadCRC},
		{"bit flip in CRC", mod(func(e []byte) []byte { e[0] ^= 1; return e }), errBadCRC},
		{"all zero", make([]byte, 64), errBadCRC},
		{"version 2", mod(func(e []byte) []byte { e[offVersion] = 2; return reseal(e) }), nil},
		{"zero count", mod(func(e []byte) []byte { binary.LittleEndian.PutUint32(e[offCount:], 0); return reseal(e) }), errZeroCount},
		{"count too high", mod(func(e []byte) []byte { binary.LittleEndian.PutUint32(e[offCount:], 4); return reseal(e) }), errBadRecord},
		{"count too low", mod(func(e []byte) []byte { binary.LittleEndian.PutUint32(e[offCount:], 2); return reseal(e) }), errBadRecord},
		{"record length past the end", mod(func(e []byte) []byte { e[headerSize] = 0x7f; return reseal(e) }), errBadRecord},
		{"record length overflows", mod(func(e []byte) []byte {
			copy(e[headerSize:], bytes.Repeat([]byte{0xff}, 11))
			return reseal(e)
		}), errBadRecord},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := decodeEntry(tc.e)
			if err == nil || !isFormatError(err) || (tc.want != nil && !errors.Is(err, tc.want)) {
				t.Fatalf("decodeEntry = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestDecodeFrame(t *testing.T) {
	for _, tc := range []struct {
		name  string
		b     []byte
		avail int64
		hdr   int
		size  int64
		want  error
	}{
		{"one-byte length", []byte{5, 0, 0, 0, 0, 0}, 6, 1, 5, nil},
		{"two-byte length", []byte{0x80, 1}, 130, 2, 128, nil},
		{"zero length", []byte{0, 1}, 2, 0, 0, errZeroFrame},
		{"runs past the end", []byte{9, 0}, 5, 0, 0, errShortFrame},
		{"length cut", []byte{0x80}, 1, 0, 0, errShortFrame},
		{"overflow", bytes.Repeat([]byte{0xff}, 10), 100, 0, 0, errBadFrameLen},
		{"empty", nil, 0, 0, 0, errShortFrame},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hdr, size, err := decodeFrame(tc.b, tc.avail)
			if !errors.Is(err, tc.want) || (err == nil && (hdr != tc.hdr || size != tc.size)) {
				t.Fatalf("decodeFrame = %d, %d, %v; want %d, %d, %v", hdr, size, err, tc.hdr, tc.size, tc.want)
			}
		})
	}
}

// FuzzDecodeEntry checks that no input makes the decoders panic, and that
// whatever decodeEntry accepts re-encodes to the same bytes.
func FuzzDecodeEntry(f *testing.F) {
	f.Add(encodeEntry(42, goldenRecords))
	f.Add(make([]byte, headerSize))
	f.Fuzz(func(t *testing.T, e []byte) {
		h, err := decodeEntry(e)
		_, _, _ = decodeFrame(e, int64(len(e)))
		if err != nil {
			return
		}
		var recs [][]byte
		body := e[headerSize:]
		for range h.count {
			var rec []byte
			rec, body, _ = nextRecord(body)
			recs = append(recs, rec)
		}
		if again := encodeEntry(h.first, recs); !bytes.Equal(again, e) {
			t.Fatalf("re-encoding differs:\n%x\n%x", again, e)
		}
	})
}

func crcOf(e []byte) uint32 { return crc32.Checksum(e[offVersion:], castagnoli) }
