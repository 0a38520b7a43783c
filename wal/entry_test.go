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

var update = flag.Bool("update", false, "rewrite testdata/entry-v2.golden")

// goldenRecords is the entry pinned by testdata/entry.golden (version 1)
// and testdata/entry-v2.golden: LSNs 42-44.
var goldenRecords = [][]byte{[]byte("alpha"), {}, []byte("gamma-\x00\xff")}

// goldenSynced is the Synced LSN of the version-2 golden entry.
const goldenSynced = 0x0102030405060708

// encodeEntryV1 builds a version-1 entry, as releases before version 2
// wrote them: the header without a Synced LSN.
func encodeEntryV1(first LSN, recs [][]byte) []byte {
	e := make([]byte, headerSize1)
	for _, r := range recs {
		e = appendRecord(e, r)
	}
	e[offVersion] = entryVersion1
	binary.LittleEndian.PutUint64(e[offFirstLSN:], first)
	binary.LittleEndian.PutUint32(e[offCount:], uint32(len(recs)))
	binary.LittleEndian.PutUint32(e, crcOf(e))
	return e
}

// TestEntryGolden pins the wire format: a framed entry of each version as
// tidwall/wal stores it, byte for byte. Version 1 is no longer written,
// so its file is only read: the logs of older releases must still decode.
func TestEntryGolden(t *testing.T) {
	t.Run("version 2", func(t *testing.T) {
		got := appendFrame(nil, encodeEntry(42, goldenSynced, goldenRecords))
		path := filepath.Join("testdata", "entry-v2.golden")
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
		checkGoldenDecodes(t, want, entryHeader{first: 42, count: 3, synced: goldenSynced, version: entryVersion2})
	})
	t.Run("witness", func(t *testing.T) {
		got := appendFrame(nil, encodeEntry(45, goldenSynced, nil))
		path := filepath.Join("testdata", "entry-witness.golden")
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
			t.Fatalf("witness bytes changed; the format is frozen.\n got %x\nwant %x", got, want)
		}
		k, size, err := decodeFrame(want, int64(len(want)))
		if err != nil || k != 1 || size != headerSize2 {
			t.Fatalf("decodeFrame = %d, %d, %v; want a 25-byte entry", k, size, err)
		}
		h, err := decodeEntry(want[k:])
		if w := (entryHeader{first: 45, synced: goldenSynced, version: entryVersion2}); err != nil || h != w || !h.witness() || h.end() != h.first {
			t.Fatalf("decodeEntry = %+v, %v; want %+v, a witness", h, err, w)
		}
	})
	t.Run("version 1", func(t *testing.T) {
		want, err := os.ReadFile(filepath.Join("testdata", "entry.golden"))
		if err != nil {
			t.Fatal(err)
		}
		if got := appendFrame(nil, encodeEntryV1(42, goldenRecords)); !bytes.Equal(got, want) {
			t.Fatalf("version-1 encoder differs from the golden file\n got %x\nwant %x", got, want)
		}
		checkGoldenDecodes(t, want, entryHeader{first: 42, count: 3, synced: syncedUnknown, version: entryVersion1})
	})
}

// checkGoldenDecodes checks that the framed golden entry decodes to want
// and goldenRecords.
func checkGoldenDecodes(t *testing.T, framed []byte, want entryHeader) {
	t.Helper()
	k, size, err := decodeFrame(framed, int64(len(framed)))
	if err != nil || int(size) != len(framed)-k {
		t.Fatalf("decodeFrame = %d, %d, %v", k, size, err)
	}
	e := framed[k:]
	h, err := decodeEntry(e)
	if err != nil || h != want {
		t.Fatalf("decodeEntry = %+v, %v; want %+v", h, err, want)
	}
	d := newDecodedEntry(h, e)
	for i, rec := range goldenRecords {
		if got := d.record(42 + LSN(i)); !bytes.Equal(got, rec) {
			t.Fatalf("record %d = %q, want %q", 42+i, got, rec)
		}
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
	want := appendFrame(nil, encodeEntry(42, 41, goldenRecords[:1]))
	if len(got) > len(want) { // the log stayed idle after the fsync: a witness of LSN 42 follows (witness.go)
		want = appendFrame(want, encodeEntry(43, 42, nil))
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("segment bytes\n got %x\nwant %x", got, want)
	}
}

func TestEntryRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name  string
		first LSN
		recs  [][]byte
		v1    bool // encoded as version 1
	}{
		{"one empty record", 1, [][]byte{{}}, false},
		{"golden", 42, goldenRecords, false},
		{"golden, version 1", 42, goldenRecords, true},
		{"large record", 7, [][]byte{bytes.Repeat([]byte{0xab}, 300)}, false},
		{"many records", 1 << 40, bytes.Split(bytes.Repeat([]byte("x,"), 1000), []byte(",")), false},
		{"many records, version 1", 1 << 40, bytes.Split(bytes.Repeat([]byte("x,"), 1000), []byte(",")), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, synced := encodeEntry(tc.first, tc.first-1, tc.recs), tc.first-1
			if tc.v1 {
				e, synced = encodeEntryV1(tc.first, tc.recs), syncedUnknown
			}
			h, err := decodeEntry(e)
			if err != nil || h.first != tc.first || int(h.count) != len(tc.recs) || h.synced != synced {
				t.Fatalf("decodeEntry = %+v, %v", h, err)
			}
			body := e[h.size():]
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
	good := encodeEntry(9, 8, goldenRecords)
	mod := func(f func(e []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	reseal := func(e []byte) []byte { // fix the CRC after a change, to reach later checks
		binary.LittleEndian.PutUint32(e, crcOf(e))
		return e
	}
	for _, tc := range []struct {
		name string
		e    []byte
		want error
	}{
		{"empty", nil, errShortEntry},
		{"header cut", good[:headerSize1-1], errShortEntry},
		{"version 2 header cut", reseal(append([]byte(nil), good[:headerSize2-1]...)), errShortEntry},
		{"body cut", good[:len(good)-1], errBadCRC},
		{"bit flip in payload", mod(func(e []byte) []byte { e[len(e)-1] ^= 1; return e }), errBadCRC},
		{"bit flip in CRC", mod(func(e []byte) []byte { e[0] ^= 1; return e }), errBadCRC},
		{"all zero", make([]byte, 64), errBadCRC},
		{"version 3", mod(func(e []byte) []byte { e[offVersion] = 3; return reseal(e) }), nil},
		{"version 1 with a version 2 header", mod(func(e []byte) []byte { e[offVersion] = 1; return reseal(e) }), errBadRecord},
		{"zero count with records", mod(func(e []byte) []byte { binary.LittleEndian.PutUint32(e[offCount:], 0); return reseal(e) }), errBadRecord},
		{"version 1 with zero count", reseal(func() []byte {
			e := encodeEntryV1(9, nil)
			binary.LittleEndian.PutUint32(e[offCount:], 0)
			return e
		}()), errZeroCount},
		{"witness with a record", mod(func(e []byte) []byte {
			binary.LittleEndian.PutUint32(e[offCount:], 0)
			return reseal(e[:headerSize2+2])
		}), errBadRecord},
		{"count too high", mod(func(e []byte) []byte { binary.LittleEndian.PutUint32(e[offCount:], 4); return reseal(e) }), errBadRecord},
		{"count too low", mod(func(e []byte) []byte { binary.LittleEndian.PutUint32(e[offCount:], 2); return reseal(e) }), errBadRecord},
		{"record length past the end", mod(func(e []byte) []byte { e[headerSize2] = 0x7f; return reseal(e) }), errBadRecord},
		{"record length overflows", mod(func(e []byte) []byte {
			copy(e[headerSize2:], bytes.Repeat([]byte{0xff}, 11))
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
	f.Add(encodeEntry(42, 41, goldenRecords))
	f.Add(encodeEntryV1(42, goldenRecords))
	f.Add(make([]byte, headerSize2))
	f.Fuzz(func(t *testing.T, e []byte) {
		h, err := decodeEntry(e)
		_, _, _ = decodeFrame(e, int64(len(e)))
		if err != nil {
			return
		}
		var recs [][]byte
		body := e[h.size():]
		for range h.count {
			var rec []byte
			rec, body, _ = nextRecord(body)
			recs = append(recs, rec)
		}
		again := encodeEntry(h.first, h.synced, recs)
		if h.version == entryVersion1 {
			again = encodeEntryV1(h.first, recs)
		}
		if !bytes.Equal(again, e) {
			t.Fatalf("re-encoding differs:\n%x\n%x", again, e)
		}
	})
}

func crcOf(e []byte) uint32 { return crc32.Checksum(e[offVersion:], castagnoli) }
