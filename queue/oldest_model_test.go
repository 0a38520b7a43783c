package queue_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/internal/fakeclock"
	"github.com/walq/walq/queue"
)

// oldestModelSeeds are replayed on every run, beside one random seed.
var oldestModelSeeds = []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}

// TestOldestEnqueuedAtModel drives a sorted queue through every path that
// removes or returns a value (ack, nack, lease expiry, dead-lettering at
// pull/nack/lease end, requeue and purge of dead values, compaction that
// copies values forward, crash and clean reopen) and requires after each
// step that Stats().OldestEnqueuedAt is the publish time of the oldest
// value neither acked nor dead. With -short or -race it runs fewer seeds
// and steps.
func TestOldestEnqueuedAtModel(t *testing.T) {
	seeds, steps := oldestModelSeeds, 400
	switch {
	case testing.Short():
		seeds, steps = seeds[:2], 120
	case raceEnabled:
		seeds, steps = seeds[:2], 150
	}
	random := uint64(time.Now().UnixNano())
	t.Logf("random seed %d", random)
	for _, seed := range append(seeds[:len(seeds):len(seeds)], random) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { oldestModelRun(t, seed, steps) })
	}
}

func oldestModelRun(t *testing.T, seed uint64, steps int) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(seed, 7))
	clk := fakeclock.New()
	dir := t.TempDir()
	opts := func() *queue.SortedOptions {
		return &queue.SortedOptions{Options: queue.Options{Clock: clk, ManualRequeue: true, AckTimeout: time.Minute,
			MaxDeliveries: 1 + rng.IntN(3), SegmentSize: 4 << 10, SnapshotBytes: 16 << 10}, CacheBytes: -1, SingleFlight: seed%2 == 0}
	}
	s, err := queue.OpenSorted[int64](dir, opts())
	require.NoError(t, err)
	defer func() { s.Close() }()
	published := map[string]time.Time{} // payload -> publish time, of values not acked
	var held []*queue.Batch[int64]
	n := 0
	var moved uint64
	var deadCount int
	defer func() { t.Logf("moved %d, dead at most %d", moved, deadCount) }()
	for step := range steps {
		clk.Advance(time.Millisecond)
		what := ""
		switch op := rng.IntN(100); {
		case op < 10:
			// churn: values pulled and acked at once grow the log, so that
			// a compaction copies the old values forward.
			for i := 0; i < 20; i++ {
				require.NoError(t, s.Publish(ctx, -1000, "churn", make([]byte, 2000)))
			}
			bs, err := s.TryPull(1)
			require.NoError(t, err)
			require.Equal(t, "churn", bs[0].Key)
			require.NoError(t, bs[0].Ack())
			what = "churn"
		case op < 40:
			n++
			p := fmt.Sprintf("v%d-%s", n, string(make([]byte, rng.IntN(300))))
			require.NoError(t, s.Publish(ctx, rng.Int64N(50), fmt.Sprint("k", rng.IntN(6)), []byte(p)))
			published[p] = clk.Now()
			what = "publish"
		case op < 50:
			bs, err := s.TryPull(1 + rng.IntN(2))
			if !errors.Is(err, queue.ErrEmpty) {
				require.NoError(t, err)
			}
			held = append(held, bs...)
			what = "pull"
		case op < 80 && len(held) > 0:
			i := rng.IntN(len(held))
			b := held[i]
			held = append(held[:i], held[i+1:]...)
			switch rng.IntN(3) {
			case 0:
				if b.Ack() == nil {
					for _, v := range b.Values {
						delete(published, string(v.Payload))
					}
				}
				what = "ack"
			case 1:
				_ = b.Nack(time.Duration(rng.IntN(3)) * time.Millisecond)
				what = "nack"
			case 2:
				_ = b.DeadLetter("bad")
				what = "dead-letter"
			}
		case op < 84:
			clk.Advance(2 * time.Minute)
			_, err := s.RequeueExpired()
			require.NoError(t, err)
			held = nil
			what = "expire"
		case op < 88:
			ds, err := s.DeadValues(0, 0)
			require.NoError(t, err)
			if len(ds) > 0 {
				d := ds[rng.IntN(len(ds))]
				if rng.IntN(2) == 0 {
					require.NoError(t, s.RequeueDead(d.Seq))
					what = "requeue-dead"
				} else {
					require.NoError(t, s.PurgeDead(d.Seq))
					delete(published, string(d.Payload))
					what = "purge"
				}
			}
		case op < 92:
			require.NoError(t, s.Compact())
			what = "compact"
		case op < 96:
			img := liveCrashImage(t, dir)
			require.NoError(t, s.Close())
			dir = img
			s, err = queue.OpenSorted[int64](dir, opts())
			require.NoError(t, err)
			held = nil
			what = "crash"
		default:
			require.NoError(t, s.Close())
			s, err = queue.OpenSorted[int64](dir, opts())
			require.NoError(t, err)
			held = nil
			what = "reopen"
		}
		ds, err := s.DeadValues(0, 0)
		require.NoError(t, err)
		dead := map[string]bool{}
		for _, d := range ds {
			dead[string(d.Payload)] = true
		}
		var want time.Time
		for p, at := range published {
			if !dead[p] && (want.IsZero() || at.Before(want)) {
				want = at
			}
		}
		st := s.Stats()
		moved, deadCount = max(moved, st.Moved), max(deadCount, st.SortedDead)
		got := st.OldestEnqueuedAt
		require.Equal(t, want.UnixNano(), got.UnixNano(), "step %d after %s: OldestEnqueuedAt %v, want %v", step, what, got, want)
	}
}

// liveCrashImage copies dir as a crash would leave it, while the queue's
// housekeeper may compact: a copy that meets a file removed meanwhile is
// taken again (the log is copied before the snapshots, so a copy that
// completes holds a snapshot and the log it needs).
func liveCrashImage(t *testing.T, src string) string {
	t.Helper()
	for try := 0; ; try++ {
		dst := t.TempDir()
		err := filepath.Walk(src, func(path string, info os.FileInfo, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(src, path)
			if info.IsDir() {
				return os.MkdirAll(filepath.Join(dst, rel), 0o700)
			}
			return copyFile(path, filepath.Join(dst, rel))
		})
		if err == nil {
			return dst
		}
		require.Less(t, try, 20, "copy of %s: %v", src, err)
	}
}
