package queue_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
)

// TestSalvagePreviewBesideCompactingQueue opens a salvage preview
// (ReadOnly and Salvage), again and again, beside a healthy queue whose
// compactions truncate its log under the preview, writing and removing
// their NAME.FRONT markers. A marker of the running queue is never from a
// later moment than the snapshot it was written with, and a preview that
// loaded an older snapshot is overtaken: it must try again, never refuse
// the healthy queue as corrupt (ErrCorrupt, ErrLaterFront), nor show a
// loss (Recovery.LostBefore, Recovery.Dropped).
func TestSalvagePreviewBesideCompactingQueue(t *testing.T) {
	dir := t.TempDir()
	q := open(t, dir, &queue.Options{SegmentSize: 4 << 10, SnapshotBytes: 8 << 10, Sync: queue.SyncNever})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	stop := func() error { cancel(); wg.Wait(); return q.Close() }
	t.Cleanup(func() { _ = stop() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ctx.Err() == nil; i++ {
			id := fmt.Sprintf("m-%d", i)
			if _, err := q.Enqueue(ctx, []byte(liveBody(id)), queue.WithID(id)); err != nil {
				if ctx.Err() == nil {
					t.Errorf("enqueue: %v", err)
				}
				return
			}
			if i%3 == 0 {
				continue // a backlog grows, whose records the snapshots need
			}
			m, err := q.Dequeue(ctx)
			if err == nil {
				err = m.Ack()
			}
			if err == nil && i%40 == 0 {
				err = q.Compact()
			}
			if err != nil && ctx.Err() == nil {
				t.Errorf("settle %d: %v", i, err)
				return
			}
		}
	}()
	deadline := time.Now().Add(3 * time.Second)
	opens, refused := 0, map[string]int{}
	for time.Now().Before(deadline) && !t.Failed() {
		r, err := queue.Open(dir, &queue.Options{ReadOnly: true, Salvage: true})
		if err != nil {
			if errors.Is(err, queue.ErrCorrupt) || errors.Is(err, queue.ErrLaterFront) {
				t.Fatalf("salvage preview beside a healthy compacting queue: %v", err)
			}
			refused[err.Error()]++
			continue
		}
		rec := r.Recovery()
		r.Close()
		opens++
		if rec.LostBefore != 0 || len(rec.Dropped) != 0 {
			t.Fatalf("salvage preview beside a healthy compacting queue shows a loss: LostBefore %d, Dropped %d",
				rec.LostBefore, len(rec.Dropped))
		}
	}
	require.NoError(t, stop())
	t.Logf("%d previews opened; refused: %v", opens, refused)
	require.Positive(t, opens)
}
