package main_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/internal/testhook"
	"github.com/walq/walq/queue"
)

// compactOutput is what walq compact prints; moved is the count of
// messages it says it copied forward.
func compactOutput(moved string) string {
	return `^log before: .* in \d+ segments? \(live .*\)\n` +
		`log after:  .* in \d+ segments? \(live .*\), snapshot at LSN \d+, ` + moved + ` moved forward\n$`
}

// liveRecords returns, for each id, the LSN and op of the last enqueue or
// move record that carries it: where that message lives in dir's log.
func liveRecords(t *testing.T, dir string, ids []string) map[string]queue.Record {
	t.Helper()
	want := make(map[string]bool, len(ids))
	for _, id := range ids {
		want[id] = true
	}
	found := make(map[string]queue.Record, len(ids))
	require.NoError(t, queue.ReadLog(dir, 0, func(r queue.Record) error {
		if want[r.ID] && (r.Op == "enqueue" || r.Op == "move") {
			r.Payload = nil
			found[r.ID] = r
		}
		return nil
	}))
	require.Len(t, found, len(ids), "every live message has a record in the log")
	return found
}

// requireFrontCut fails unless the log's first segment holds the oldest of
// the live records: the log front is cut at the segment boundary below the
// oldest live message, and no segment that holds nothing live is left in
// front of it.
func requireFrontCut(t *testing.T, s statsJSON, live map[string]queue.Record) {
	t.Helper()
	oldest := ^uint64(0)
	for _, r := range live {
		oldest = min(oldest, r.LSN)
	}
	require.NotEmpty(t, s.Segments)
	require.LessOrEqual(t, s.Segments[0].FirstLSN, oldest, "the oldest live record was not cut")
	if len(s.Segments) > 1 {
		require.Greater(t, s.Segments[1].FirstLSN, oldest,
			"the segment before the one holding the oldest live record was removed")
	}
}

func ids(prefix string, from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, fmt.Sprintf("%s-%03d", prefix, i))
	}
	return out
}

// TestCompact runs walq compact on a queue whose process acked 190 of 200
// messages one at a time and closed, in each state that process's own
// compactions can leave. Its compactions run in the background when the
// scheduler lets them, so the test turns them off and compacts at a chosen
// point instead: every state is made on purpose, none by chance.
//
// walq opens the queue with the default options, 4 MiB segments, so its
// bound (twice the live bytes plus two segments) is far above this log of
// a few 4 KiB segments: it copies nothing and cuts the log front at the
// segment that holds the oldest live message. Whether the ten are still in
// their first records or copies depends on the state it finds.
func TestCompact(t *testing.T) {
	for _, tc := range []struct {
		name      string
		compactAt int    // acks before the queue's process compacts; -1: it never does
		op        string // the record the ten live in afterwards
	}{
		{"never compacted before", -1, "enqueue"},
		{"compacted before the log outgrew its bound", 40, "enqueue"},
		{"compacted after, copying the ten forward", 150, "move"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := cleanQueue(t, 200)
			o := fixtureOptions()
			testhook.SetManualCompaction(o)
			q, err := queue.Open(dir, o)
			require.NoError(t, err)
			for i := range 190 {
				if i == tc.compactAt {
					require.NoError(t, q.Compact())
				}
				m, err := q.TryDequeue()
				require.NoError(t, err)
				require.NoError(t, m.Ack())
			}
			require.NoError(t, q.Close())

			r := mustWalq(t, 0, "", "compact", dir)
			require.Regexp(t, compactOutput("0 messages"), r.stdout)
			s := stats(t, dir)
			require.EqualValues(t, 10, s.Ready)
			live := liveRecords(t, dir, ids("msg", 190, 200))
			for id, rec := range live {
				require.Equal(t, tc.op, rec.Op, id)
			}
			requireFrontCut(t, s, live)
			got := dequeueJSON(t, dir)
			require.Equal(t, "msg-190", got.ID, "the oldest of the ten comes first")
		})
	}
}

// TestCompactCopiesForward: ten ready-again messages at the front of a log
// that holds more than walq's bound of acked records behind them are
// copied forward by walq compact, and every segment before the copies is
// removed.
func TestCompactCopiesForward(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "q")
	o := &queue.Options{SegmentSize: 1 << 20, AckTimeout: time.Minute}
	testhook.SetManualCompaction(o)
	q, err := queue.Open(dir, o)
	require.NoError(t, err)
	ctx := context.Background()
	keep := ids("keep", 0, 10)
	var leased []*queue.Message
	for _, id := range keep {
		_, err := q.Enqueue(ctx, []byte("kept "+id), queue.WithID(id))
		require.NoError(t, err)
		m, err := q.TryDequeue()
		require.NoError(t, err)
		leased = append(leased, m)
	}
	filler := []byte(strings.Repeat("f", 128<<10))
	for _, id := range ids("fill", 0, 80) { // 10 MiB, over the 8 MiB of two default segments
		_, err := q.Enqueue(ctx, filler, queue.WithID(id))
		require.NoError(t, err)
		m, err := q.TryDequeue()
		require.NoError(t, err)
		require.NoError(t, m.Ack())
	}
	for _, m := range leased {
		require.NoError(t, m.Nack(0))
	}
	require.NoError(t, q.Close())
	before := stats(t, dir)
	require.Greater(t, before.LogBytes, 2*before.LiveBytes+2*(4<<20), "the log is over walq's bound")

	r := mustWalq(t, 0, "", "compact", dir)
	require.Regexp(t, compactOutput("10 messages"), r.stdout)
	s := stats(t, dir)
	require.EqualValues(t, 10, s.Ready)
	live := liveRecords(t, dir, keep)
	for id, rec := range live {
		require.Equal(t, "move", rec.Op, id)
	}
	requireFrontCut(t, s, live)
	require.Less(t, s.LogBytes, int64(2<<20), "the acked fillers' segments were removed")
	got := dequeueJSON(t, dir)
	require.Equal(t, "keep-000", got.ID)
	require.Equal(t, "kept keep-000", got.Payload)
}

// openTimeSorted opens the sorted (kind "sorted") or windowed queue of
// time sort keys in dir with o.
func openTimeSorted(t *testing.T, dir, kind string, o queue.Options) *queue.Sorted[time.Time] {
	t.Helper()
	so := queue.SortedOptions{Options: o}
	if kind == "windowed" {
		w, err := queue.OpenWindowed(dir, &queue.WindowOptions{SortedOptions: so, Window: time.Nanosecond})
		require.NoError(t, err)
		return w.Sorted
	}
	s, err := queue.OpenSorted[time.Time](dir, &so)
	require.NoError(t, err)
	return s
}

// TestCompactSorted: walq compact works on sorted and windowed queues as
// on ack queues: on a queue whose process died before its Close could
// snapshot, it snapshots, cuts the log front down to the segment of the
// oldest pending value, and keeps every value.
func TestCompactSorted(t *testing.T) {
	for _, kind := range []string{"sorted", "windowed"} {
		t.Run(kind, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "s")
			o := *fixtureOptions()
			testhook.SetManualCompaction(&o)
			s := openTimeSorted(t, dir, kind, o)
			payload := []byte(strings.Repeat("v", 100))
			for i := range 200 {
				require.NoError(t, s.Publish(context.Background(), time.Unix(int64(i), 0), fmt.Sprintf("key-%03d", i), payload))
			}
			for range 190 {
				bs, err := s.TryPull(1)
				require.NoError(t, err)
				require.NoError(t, bs[0].Ack())
			}
			image := filepath.Join(t.TempDir(), "s") // a kill -9 now: no snapshot at Close
			copyTree(t, dir, image)
			require.NoError(t, s.Close())
			dir = image
			before := stats(t, dir)

			r := mustWalq(t, 0, "", "compact", dir)
			require.Regexp(t, compactOutput("0 values"), r.stdout)
			after := stats(t, dir)
			require.Less(t, len(after.Segments), len(before.Segments), "the front of the log was cut")
			require.LessOrEqual(t, after.Segments[0].FirstLSN, uint64(191), "the oldest pending value (LSN 191) was kept")
			ro := openTimeSorted(t, dir, kind, queue.Options{ReadOnly: true})
			defer ro.Close()
			keys, err := ro.Keys("", 100)
			require.NoError(t, err)
			require.Len(t, keys, 10)
			require.Equal(t, "key-190", keys[0].Key)
		})
	}
}
