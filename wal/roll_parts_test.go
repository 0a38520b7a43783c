package wal

import (
	"bytes"
	"fmt"
	"slices"
	"sync"
	"testing"
)

// TestBatchRollsInParts: a batch that rolls is handed to the store in
// parts, and each segment it seals is fsynced before the next part is
// written. The log is reopened with a SegmentSize below its tail's size,
// so the first batch, four groups held back until all are appended,
// seals that tail before its first entry (tidwall/wal's rule) and a
// second segment after its third: one part writes three entries and
// makes both rolls, both sealed segments are fsynced, and only then is
// the fourth entry written. Every record reads back, after a reopen too.
func TestBatchRollsInParts(t *testing.T) {
	dir := t.TempDir()
	rec := func(i int) []byte {
		b := make([]byte, 1500) // a frame of 1529 bytes
		b[0] = byte('a' + i)
		return b
	}
	l, err := Open(dir, &Options{Sync: SyncNever, SegmentSize: 64 << 10, MaxGroupBytes: 1024})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		_, c, err := l.Append(rec(i))
		if err == nil {
			err = c.Wait()
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	closeOrFail(t, l)

	var mu sync.Mutex
	var events []string // "write" for each batch write, "sync" for each fsync of a segment
	note := func(e string) {
		mu.Lock()
		events = append(events, e)
		mu.Unlock()
	}
	f := faults{
		writeBatch: func(st store, b *storeBatch) error {
			if !b.witness {
				note("write")
			}
			return st.writeBatch(b)
		},
		datasync: func(f File) error { note("sync"); return f.Datasync() },
	}
	l, err = open(dir, &Options{Sync: SyncNever, SegmentSize: 4 << 10, MaxGroupBytes: 1024}, f)
	if err != nil {
		t.Fatal(err)
	}
	l.c.mu.Lock() // the committer takes the four groups in one batch
	var last *Commit
	for i := 3; i < 7; i++ {
		var err error
		if _, last, err = l.Append(rec(i)); err != nil {
			l.c.mu.Unlock()
			t.Fatal(err)
		}
	}
	l.c.mu.Unlock()
	if err := last.Wait(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	got := slices.Clone(events)
	mu.Unlock()
	if want := []string{"write", "sync", "sync", "write"}; !slices.Equal(got, want) {
		t.Errorf("disk operations %v, want %v", got, want)
	}
	var sizes []int64
	for _, s := range l.Segments() {
		sizes = append(sizes, s.Bytes)
	}
	if want := []int64{3 * 1529, 3 * 1529, 1529}; !slices.Equal(sizes, want) {
		t.Errorf("segments of %v bytes, want %v", sizes, want)
	}
	check := func(l *Log) {
		t.Helper()
		for i := range 7 {
			b, err := l.Read(LSN(i + 1))
			if err != nil || !bytes.Equal(b, rec(i)) {
				t.Fatalf("Read(%d): %v, or not the record appended", i+1, err)
			}
		}
	}
	check(l)
	closeOrFail(t, l)
	l, err = Open(dir, &Options{SegmentSize: 4 << 10})
	if err != nil {
		t.Fatal(err)
	}
	check(l)
	closeOrFail(t, l)
}

// TestBatchWritesPerSegment: a batch is handed to the store in one write
// for each segment it reaches, never more: one write when it does not
// roll, none for the empty tail left by a roll at its last entry, and the
// segment each roll seals is fsynced before the next part is written.
func TestBatchWritesPerSegment(t *testing.T) {
	for _, tc := range []struct {
		groups int
		want   []string
	}{
		{1, []string{"write"}},
		{2, []string{"write"}},
		{3, []string{"write", "sync"}}, // the third group seals the segment
		{4, []string{"write", "sync", "write"}},
		{6, []string{"write", "sync", "write", "sync"}},
		{7, []string{"write", "sync", "write", "sync", "write"}},
	} {
		t.Run(fmt.Sprintf("%d groups", tc.groups), func(t *testing.T) {
			var mu sync.Mutex
			var events []string
			note := func(e string) {
				mu.Lock()
				events = append(events, e)
				mu.Unlock()
			}
			f := faults{
				writeBatch: func(st store, b *storeBatch) error {
					if !b.witness {
						note("write")
					}
					return st.writeBatch(b)
				},
				datasync: func(f File) error { note("sync"); return f.Datasync() },
			}
			l, err := open(t.TempDir(), &Options{Sync: SyncNever, SegmentSize: 4 << 10, MaxGroupBytes: 1024}, f)
			if err != nil {
				t.Fatal(err)
			}
			defer closeOrFail(t, l)
			l.c.mu.Lock() // the committer takes every group in one batch
			var last *Commit
			for i := range tc.groups {
				var err error
				if _, last, err = l.Append(make([]byte, 1500)); err != nil { // a frame of 1529 bytes
					l.c.mu.Unlock()
					t.Fatalf("Append %d: %v", i, err)
				}
			}
			l.c.mu.Unlock()
			if err := last.Wait(); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			got := slices.Clone(events)
			mu.Unlock()
			if !slices.Equal(got, tc.want) {
				t.Errorf("disk operations %v, want %v", got, tc.want)
			}
		})
	}
}
