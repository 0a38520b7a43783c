package queue_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/walq/walq/internal/testhook"
	"github.com/walq/walq/queue"
)

// TestSalvagePreviewOfDamagedSnapshot: a read-only salvaging open (the
// preview) of a directory whose newest snapshot is damaged sets it aside
// as the salvage does, instead of refusing: it opens, reports the same
// Recovery (the snapshot set aside, where a log whose front a compaction
// cut now starts, the records replayed and skipped, the drops, the log's
// damage), the same counts and every message in the same state with the
// same bytes, and writes nothing. A log that ends before the damaged
// snapshot's LSN shows the same loss.
func TestSalvagePreviewOfDamagedSnapshot(t *testing.T) {
	flip := func(b []byte) []byte { b[len(b)/2] ^= 0x10; return b }
	cases := []struct {
		name   string
		front  bool                // a compaction cut the log's front before the snapshot
		atSnap bool                // the image is taken right after the snapshot, nothing written since
		damage func([]byte) []byte // of the snapshot's bytes
		cutLog bool                // the last segment cut to half its length
	}{
		{name: "a bit flipped in the checksummed body", damage: flip},
		{name: "cut short", damage: func(b []byte) []byte { return b[:len(b)/2] }},
		{name: "magic damaged", damage: func(b []byte) []byte { b[0] ^= 1; return b }},
		{name: "a byte appended", damage: func(b []byte) []byte { return append(b, 0) }},
		{name: "emptied", damage: func(b []byte) []byte { return b[:0] }},
		{name: "log front compacted away, a bit flipped", front: true, damage: flip},
		{name: "log front compacted away, cut short", front: true, damage: func(b []byte) []byte { return b[:40] }},
		{name: "log ends before it", atSnap: true, damage: flip, cutLog: true},
		{name: "log front compacted away, log ends before it", front: true, atSnap: true, damage: flip, cutLog: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir, want := snapshotHistory(t, c.front, c.atSnap)
			snaps, err := filepath.Glob(filepath.Join(dir, "snapshot-*.snap"))
			require.NoError(t, err)
			require.Len(t, snaps, 1)
			b, err := os.ReadFile(snaps[0])
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(snaps[0], c.damage(b), 0o600))
			if c.cutLog {
				segs := segments(t, dir)
				last := segs[len(segs)-1]
				b, err := os.ReadFile(last)
				require.NoError(t, err)
				require.NoError(t, os.WriteFile(last, b[:len(b)/2], 0o600))
			}
			comparePreview(t, dir, want)
		})
	}
}

// snapshotOptions are the options of snapshotHistory's queue and of the
// opens that compare its images.
func snapshotOptions() *queue.Options {
	o := &queue.Options{SegmentSize: 4096, SnapshotBytes: 1 << 30, AckTimeout: time.Hour, ManualRequeue: true,
		MaxDeliveries: 3, DedupWindow: time.Hour}
	testhook.SetManualCompaction(o)
	return o
}

// snapshotHistory runs a history of a queue with messages of every kind
// (with ids, delayed, acked, dead-lettered, nacked, leased), one snapshot
// (Compact) and, unless atSnap, more after it, and returns a crash image
// of it and the payload of every message by id. With front, every message
// before the history was acked and the compaction cut the log's front.
func snapshotHistory(t *testing.T, front, atSnap bool) (string, map[string][]byte) {
	t.Helper()
	src := t.TempDir()
	q := open(t, src, snapshotOptions())
	want := map[string][]byte{}
	put := func(tok string, i int, opts ...queue.EnqueueOption) {
		p := []byte(fmt.Sprintf("%s:%s", tok, strings.Repeat("x", 60+i*37%200)))
		want[enqueue(t, q, string(p), opts...)] = p
	}
	if front {
		for i := range 40 {
			put(fmt.Sprint("F", i), i)
		}
		for range 40 {
			require.NoError(t, tryDequeue(t, q).Ack())
		}
	}
	for i := range 30 {
		var opts []queue.EnqueueOption
		if i%3 == 0 {
			opts = append(opts, queue.WithID(fmt.Sprint("id", i)))
		}
		if i%5 == 0 {
			opts = append(opts, queue.WithDelay(time.Hour))
		}
		put(fmt.Sprint("A", i), i, opts...)
	}
	settleSome(t, q, 12)
	require.NoError(t, q.Compact())
	if !atSnap {
		for i := range 15 {
			put(fmt.Sprint("B", i), i, queue.WithID(fmt.Sprint("b", i)))
		}
		settleSome(t, q, 6)
	}
	dir := crashImage(t, src)
	require.NoError(t, q.Close())
	if front {
		_, err := os.Stat(filepath.Join(dir, "log", "00000000000000000001"))
		require.True(t, errors.Is(err, os.ErrNotExist), "the compaction did not cut the log's first segment: %v", err)
	}
	return dir, want
}

// settleSome delivers n messages of q and acks, dead-letters, nacks or
// keeps each in turn.
func settleSome(t *testing.T, q *queue.Queue, n int) {
	t.Helper()
	for i := range n {
		m := tryDequeue(t, q)
		var err error
		switch i % 4 {
		case 0:
			err = m.Ack()
		case 1:
			err = m.DeadLetter("poison")
		case 2:
			err = m.Nack(0)
		}
		require.NoError(t, err)
	}
}

// comparePreview opens one copy of dir read-only salvaging (the preview)
// and another salvaging, and requires that they show the same: Recovery,
// counts, and every message's state, id, reason and payload, which is
// what was enqueued for its id. The preview writes nothing.
func comparePreview(t *testing.T, dir string, want map[string][]byte) {
	t.Helper()
	ro, rw := crashImage(t, dir), crashImage(t, dir)
	before := files(t, ro)
	o := snapshotOptions()
	o.Salvage, o.ReadOnly = true, true
	p, err := queue.Open(ro, o)
	require.NoError(t, err, "the preview refuses what the salvage sets aside")
	defer func() {
		require.NoError(t, p.Close())
		require.Equal(t, before, files(t, ro), "the preview wrote")
	}()
	o.ReadOnly = false
	s, err := queue.Open(rw, o)
	require.NoError(t, err)
	defer s.Close()
	require.NotEmpty(t, s.Recovery().SnapshotLost.Path, "the salvage did not set the snapshot aside")
	require.Equal(t, recoveryView(s.Recovery(), rw), recoveryView(p.Recovery(), ro))
	require.Equal(t, statsView(s.Stats()), statsView(p.Stats()))
	require.Equal(t, messagesView(t, s, want), messagesView(t, p, want))
}

// recoveryView is what a preview must report as the salvage does, with
// paths relative to dir.
func recoveryView(r queue.Recovery, dir string) string {
	rel := func(p string) string { return strings.TrimPrefix(p, dir) }
	var dmg []string
	for _, d := range r.Log.Salvaged {
		dmg = append(dmg, fmt.Sprintf("%s %d-%d", rel(d.Segment), d.FirstLSN, d.LastLSN))
	}
	return fmt.Sprintf("snapshot %d lost %s@%d (%d bytes) lostBefore %d replayed %d skipped %d dropped %v damage %v",
		r.SnapshotLSN, rel(r.SnapshotLost.Path), r.SnapshotLost.LSN, r.SnapshotLost.Bytes, r.LostBefore,
		r.Replayed, r.Skipped, r.Dropped, dmg)
}

// statsView is the counts a preview must show as the salvage does; the
// salvage ends the leases of the crashed process, which the preview shows
// in flight.
func statsView(s queue.Stats) [5]int64 {
	return [5]int64{s.Ready + s.InFlight, s.Delayed, s.Dead, int64(s.Acked), int64(s.DeadLettered)}
}

// messagesView lists every message of q, sorted, with its state (in
// flight counted as ready), id, reason and payload, requiring that the
// payload is what was enqueued for the id.
func messagesView(t *testing.T, q *queue.Queue, want map[string][]byte) []string {
	t.Helper()
	var out []string
	for st := queue.StateReady; st <= queue.StateDead; st++ {
		ms, err := q.Browse(st, 0, 10000)
		require.NoError(t, err)
		for _, m := range ms {
			full, err := q.Peek(m.Seq)
			require.NoError(t, err)
			require.True(t, bytes.Equal(want[m.ID], full.Payload), "message %d (%s): payload %q", m.Seq, m.ID, full.Payload)
			shown := st
			if st == queue.StateInFlight {
				shown = queue.StateReady
			}
			out = append(out, fmt.Sprintf("seq %d %v id %s reason %q payload %s", m.Seq, shown, m.ID, m.Reason, full.Payload[:4]))
		}
	}
	slices.Sort(out)
	return out
}
