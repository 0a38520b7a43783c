package wal

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	twal "github.com/tidwall/wal"
)

// These tests pin what tidwall/wal v1.2.1 does with a segment file longer
// than its entries, its tail zeros: where its writes land, what Open and
// TruncateFront make of the zeros, and that a roll or Close does not cut
// them. Zeros written ahead of the tail, so that an append overwrites
// blocks the file already has, rest on these facts; an upgrade that
// changes one of them fails here.

// zeroTestOptions are openTidwall's options for a log whose segments roll
// past 1 KiB.
func zeroTestOptions() Options {
	return Options{SegmentSize: 1024, DirMode: 0o700, FileMode: 0o600}
}

// binaryEntry is one entry as tidwall/wal's binary format writes it: the
// data's length as a uvarint, then the data.
func binaryEntry(data string) []byte { return append([]byte{byte(len(data))}, data...) }

func entries(data ...string) []byte {
	var b []byte
	for _, d := range data {
		b = append(b, binaryEntry(d)...)
	}
	return b
}

// extendWithZeros appends n zeros to the file at p through a file of its
// own, as a writer ahead of the tail would.
func extendWithZeros(t *testing.T, p string, n int) {
	t.Helper()
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(make([]byte, n), fi.Size()); err != nil {
		t.Fatal(err)
	}
}

func readSegment(t *testing.T, dir string, index uint64) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, segmentName(index)))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func twWrite(t *testing.T, tw *twal.Log, index uint64, data string) {
	t.Helper()
	if err := tw.Write(index, []byte(data)); err != nil {
		t.Fatalf("write entry %d: %v", index, err)
	}
}

// TestTidwallWritesAtItsOwnOffset: no segment file is opened with
// O_APPEND (the first of a new log, the tail Open reopens, one a roll
// creates); each write lands where the previous one ended, over zeros
// added behind the file's end since, and the file keeps its length. The
// roll rule counts the entries, not the file's length, and Close leaves
// the zeros.
func TestTidwallWritesAtItsOwnOffset(t *testing.T) {
	big := string(bytes.Repeat([]byte("x"), 100))
	cases := []struct {
		name  string
		setup func(t *testing.T, dir string) (*twal.Log, uint64) // the log, with "one" its last entry; the segment that holds it
	}{
		{"the first segment of a new log", func(t *testing.T, dir string) (*twal.Log, uint64) {
			tw, err := openTidwall(dir, zeroTestOptions())
			if err != nil {
				t.Fatal(err)
			}
			twWrite(t, tw, 1, "one")
			return tw, 1
		}},
		{"the tail Open reopens", func(t *testing.T, dir string) (*twal.Log, uint64) {
			if err := os.WriteFile(filepath.Join(dir, segmentName(1)), entries("one"), 0o600); err != nil {
				t.Fatal(err)
			}
			tw, err := openTidwall(dir, zeroTestOptions())
			if err != nil {
				t.Fatal(err)
			}
			return tw, 1
		}},
		{"a segment a roll creates", func(t *testing.T, dir string) (*twal.Log, uint64) {
			tw, err := openTidwall(dir, zeroTestOptions())
			if err != nil {
				t.Fatal(err)
			}
			for i := uint64(1); i <= 11; i++ { // 1111 bytes: full
				twWrite(t, tw, i, big)
			}
			twWrite(t, tw, 12, "one") // rolls first
			return tw, 12
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			tw, seg := c.setup(t, dir)
			before := segmentFiles(t, dir)
			extendWithZeros(t, filepath.Join(dir, segmentName(seg)), 4096)
			twWrite(t, tw, seg+1, "two")
			twWrite(t, tw, seg+2, "three")
			if err := tw.Close(); err != nil {
				t.Fatal(err)
			}
			want := entries("one", "two", "three")
			want = append(want, make([]byte, 4+4096-len(want))...)
			if got := readSegment(t, dir, seg); !bytes.Equal(got, want) {
				t.Fatalf("segment after two writes over 4096 zeros and Close = %d bytes %q…, want %d bytes %q…",
					len(got), got[:min(len(got), 16)], len(want), want[:16])
			}
			if names := segmentFiles(t, dir); len(names) != len(before) {
				t.Fatalf("a 1 KiB segment holding 14 bytes of entries in a 4100-byte file rolled: %v, was %v", names, before)
			}
		})
	}
}

// TestTidwallRollTruncatesTheNextFile: a roll creates the next segment
// with O_TRUNC, so zeros laid down at the next segment's name before the
// roll are gone after it.
func TestTidwallRollTruncatesTheNextFile(t *testing.T) {
	dir := t.TempDir()
	tw, err := openTidwall(dir, zeroTestOptions())
	if err != nil {
		t.Fatal(err)
	}
	big := string(bytes.Repeat([]byte("x"), 100))
	for i := uint64(1); i <= 10; i++ { // 1010 bytes: under 1024, no roll yet
		twWrite(t, tw, i, big)
	}
	if err := os.WriteFile(filepath.Join(dir, segmentName(12)), make([]byte, 4096), 0o600); err != nil {
		t.Fatal(err)
	}
	twWrite(t, tw, 11, big) // 1111 bytes: the segment is full, the next write rolls
	twWrite(t, tw, 12, "after the roll")
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if got, want := readSegment(t, dir, 12), entries("after the roll"); !bytes.Equal(got, want) {
		t.Fatalf("segment 12 after the roll = %d bytes %q…, want %q", len(got), got[:min(len(got), 16)], want)
	}
}

// TestTidwallOpenReadsZerosAsEntries: Open takes each zero byte of the
// tail for an empty entry (a zero uvarint length), never for the end of
// the log or for damage, and appends after the zeros. A zero tail must be
// cut before tidwall/wal opens the segment.
func TestTidwallOpenReadsZerosAsEntries(t *testing.T) {
	dir := t.TempDir()
	seg := append(entries("one", "two"), make([]byte, 10)...)
	if err := os.WriteFile(filepath.Join(dir, segmentName(1)), seg, 0o600); err != nil {
		t.Fatal(err)
	}
	tw, err := openTidwall(dir, zeroTestOptions())
	if err != nil {
		t.Fatalf("Open on a segment with 10 zeros after its entries: %v", err)
	}
	last, err := tw.LastIndex()
	if err != nil || last != 12 {
		t.Fatalf("LastIndex = %d, %v; want 12 (2 entries, then each of 10 zeros an empty entry)", last, err)
	}
	if got, err := tw.Read(3); err != nil || len(got) != 0 {
		t.Fatalf("Read(3) = %q, %v; want an empty entry", got, err)
	}
	twWrite(t, tw, 13, "three")
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if got, want := readSegment(t, dir, 1), append(seg, binaryEntry("three")...); !bytes.Equal(got, want) {
		t.Fatalf("segment after a write = %q, want %q: the write after the zeros", got, want)
	}
}

// TestTidwallTruncateFrontAndZeros: TruncateFront writes the kept entries
// from its copy of the segment in memory: zeros it read at Open (as
// entries) are kept, zeros added behind its back since are not.
func TestTidwallTruncateFrontAndZeros(t *testing.T) {
	t.Run("zeros read at Open are kept", func(t *testing.T) {
		dir := t.TempDir()
		seg := append(entries("one", "two", "three"), make([]byte, 5)...)
		if err := os.WriteFile(filepath.Join(dir, segmentName(1)), seg, 0o600); err != nil {
			t.Fatal(err)
		}
		tw, err := openTidwall(dir, zeroTestOptions())
		if err != nil {
			t.Fatal(err)
		}
		if err := tw.TruncateFront(2); err != nil {
			t.Fatal(err)
		}
		if err := tw.Close(); err != nil {
			t.Fatal(err)
		}
		if got, want := readSegment(t, dir, 2), seg[len(binaryEntry("one")):]; !bytes.Equal(got, want) {
			t.Fatalf("segment 2 after TruncateFront(2) = %q, want %q", got, want)
		}
	})
	t.Run("zeros added since Open are cut", func(t *testing.T) {
		dir := t.TempDir()
		tw, err := openTidwall(dir, zeroTestOptions())
		if err != nil {
			t.Fatal(err)
		}
		for i, d := range []string{"one", "two", "three"} {
			twWrite(t, tw, uint64(i+1), d)
		}
		extendWithZeros(t, filepath.Join(dir, segmentName(1)), 4096)
		if err := tw.TruncateFront(2); err != nil {
			t.Fatal(err)
		}
		twWrite(t, tw, 4, "four")
		if err := tw.Close(); err != nil {
			t.Fatal(err)
		}
		if got, want := readSegment(t, dir, 2), entries("two", "three", "four"); !bytes.Equal(got, want) {
			t.Fatalf("segment 2 after TruncateFront(2) and a write = %d bytes %q…, want %q", len(got), got[:min(len(got), 16)], want)
		}
	})
}

// segmentFiles lists the names in dir.
func segmentFiles(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, de := range des {
		names = append(names, de.Name())
	}
	return names
}
