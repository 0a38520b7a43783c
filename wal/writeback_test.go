package wal

import (
	"sync"
	"testing"
)

// hintLog records the writeback hints a Log makes, per segment file.
type hintLog struct {
	mu    sync.Mutex
	files []File              // in the order of their first hint
	spans map[File][][2]int64 // each hint's [off, off+n)
}

func (h *hintLog) faults() faults {
	h.spans = make(map[File][][2]int64)
	return faults{writeback: func(f File, off, n int64) error {
		h.mu.Lock()
		defer h.mu.Unlock()
		if _, ok := h.spans[f]; !ok {
			h.files = append(h.files, f)
		}
		h.spans[f] = append(h.spans[f], [2]int64{off, off + n})
		return nil
	}}
}

// TestWritebackHints: without an fsync per write, the tail's bytes are
// handed to the kernel's writeback as the segment fills, in whole
// writebackAlign blocks of about writebackChunk bytes, each byte once,
// from the start of each segment on: the fsync of a roll then finds them
// written. (How far the hints reach before a roll depends on when the
// syncer goroutine runs: a write never waits for it.) A hint makes
// nothing durable: DurableLSN moves only with the fsync of a roll. Under
// SyncAlways no hint is made.
func TestWritebackHints(t *testing.T) {
	const segSize = 1 << 20
	for _, tc := range []struct {
		name  string
		sync  SyncMode
		hints bool
	}{
		{"SyncNever", SyncNever, true},
		{"SyncInterval", SyncInterval, true},
		{"SyncAlways", SyncAlways, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h hintLog
			opts := &Options{Sync: tc.sync, SyncInterval: 1 << 62, SegmentSize: segSize}
			l, err := open(t.TempDir(), opts, h.faults())
			if err != nil {
				t.Fatal(err)
			}
			rec := make([]byte, 8000)
			for range 7 * segSize / 2 / len(rec) { // three and a half segments
				if _, err := loneStep(l, rec, false); err != nil {
					t.Fatal(err)
				}
			}
			if tc.sync == SyncNever && l.DurableLSN() >= l.WrittenLSN() {
				t.Fatalf("DurableLSN %d reaches WrittenLSN %d before Close under SyncNever", l.DurableLSN(), l.WrittenLSN())
			}
			closeOrFail(t, l) // waits for the hints in flight
			if !tc.hints {
				if len(h.files) > 0 {
					t.Fatalf("%d segments got writeback hints under %s", len(h.files), tc.name)
				}
				return
			}
			if len(h.files) == 0 {
				t.Fatal("no writeback hint over 3 filled segments")
			}
			chunk := writebackChunk(segSize)
			for i, f := range h.files {
				end := int64(0)
				for _, s := range h.spans[f] {
					switch {
					case s[0] != end:
						t.Fatalf("segment %d: hint [%d, %d) after one ending at %d", i, s[0], s[1], end)
					case s[1]%writebackAlign != 0 || s[1]-s[0] < chunk-writebackAlign:
						t.Fatalf("segment %d: hint [%d, %d): not whole %d-byte blocks of about %d bytes", i, s[0], s[1], writebackAlign, chunk)
					}
					end = s[1]
				}
				if end > segSize+int64(len(rec))+64 {
					t.Fatalf("segment %d: hints reach %d, past the end of a %d-byte segment", i, end, segSize)
				}
			}
		})
	}
}
