package queue_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
)

// sortedLiveBody is the payload of the value published under key with
// sort key sort: a reader that finds another payload under a dead value's
// key and sort key read a wrong record.
func sortedLiveBody(key string, sort int64) string {
	return "value " + key + "/" + strconv.FormatInt(sort, 10) + strings.Repeat(".", 200)
}

// TestSortedReadOnlyBesideBusyQueue is TestReadOnlyBesideBusyQueue for a
// sorted queue (what walq dlq list and walq stats open beside the
// application): read-only opens, again and again, while the writer
// publishes, pulls, acks, nacks, dead-letters, requeues dead values and
// compacts with small segments, so that compactions copy pending and dead
// values forward and cut the log under the reader. Every dead value a
// read-only open lists must carry its own payload, and its key's pending
// values must be counted as the files say; an error is allowed only as a
// refusal to read (the writer removed a file under it), never ErrCorrupt
// of a healthy queue.
func TestSortedReadOnlyBesideBusyQueue(t *testing.T) {
	dir := t.TempDir()
	s, err := queue.OpenSorted[int64](dir, &queue.SortedOptions{Options: queue.Options{SegmentSize: 8 << 10,
		SnapshotBytes: 16 << 10, MaxDeliveries: 3, Sync: queue.SyncNever}})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	stop := func() error { cancel(); wg.Wait(); return s.Close() }
	t.Cleanup(func() { _ = stop() })
	// A backlog of values that stay pending, spread over many segments.
	for i := range 2000 {
		key := fmt.Sprintf("b%d", i%50)
		require.NoError(t, s.Publish(ctx, int64(i), key, []byte(sortedLiveBody(key, int64(i)))))
	}
	// Dead values from the start: the first opens have some to show, on
	// a machine too slow for the rounds to dead-letter any before them.
	bs, err := s.TryPull(5)
	require.NoError(t, err)
	for _, b := range bs {
		require.NoError(t, b.DeadLetter("test"))
	}
	// The publisher publishes as many values as the rounds pull: the
	// backlog stays about as it is, and the publisher, which never waits
	// for anything else, does not take a core of a small machine from the
	// rounds and the read-only opens.
	credit := newCredits() // a value per value pulled
	var published, rounds atomic.Int64
	wg.Add(2)
	go func() {
		defer wg.Done()
		for i := 2000; credit.take(ctx); i++ {
			key := fmt.Sprintf("k%d", i%17)
			if err := s.Publish(ctx, int64(i), key, []byte(sortedLiveBody(key, int64(i)))); err != nil && ctx.Err() == nil {
				t.Errorf("publish: %v", err)
				return
			}
			published.Add(1)
		}
	}()
	go func() {
		defer wg.Done()
		for i := 0; ctx.Err() == nil; i++ {
			n, err := sortedLiveRound(ctx, s, i)
			if err != nil && ctx.Err() == nil {
				t.Errorf("round %d: %v", i, err)
				return
			}
			rounds.Add(1)
			credit.give(n)
		}
	}()
	// 3 s of opens, and on until one showed dead values (the rounds
	// requeue them all now and then), for 2 minutes at most.
	deadline, giveUp := time.Now().Add(3*time.Second), time.Now().Add(2*time.Minute)
	var tally liveTally
	for !t.Failed() && (time.Now().Before(deadline) || tally.shown == 0 && time.Now().Before(giveUp)) {
		n, err := inspectSortedLive(dir)
		tally.add(t, n, err)
	}
	require.NoError(t, stop())
	t.Logf("%d read-only opens showed %d dead values; refused: %v; %d rounds, %d values published",
		tally.opens, tally.shown, tally.refused, rounds.Load(), published.Load())
	require.Positive(t, tally.opens)
	require.Positive(t, tally.shown)
}

// sortedLiveRound pulls a few batches of s and settles them: most are
// acked, some nacked, some dead-lettered; now and then the dead values are
// requeued, one by one or all at once, and the queue compacted. It
// returns how many values it pulled.
func sortedLiveRound(ctx context.Context, s *queue.Sorted[int64], i int) (int, error) {
	bs, err := s.Pull(ctx, 3)
	if err != nil {
		return 0, err
	}
	n := 0
	for k, b := range bs {
		n += len(b.Values)
		switch (i + k) % 5 {
		case 1:
			err = b.Nack(0)
		case 2, 3:
			err = b.DeadLetter("test")
		default:
			err = b.Ack()
		}
		if err != nil {
			return n, err
		}
	}
	switch {
	case i%40 == 7:
		_, err = s.RequeueAllDead()
	case i%9 == 4:
		var ds []queue.DeadValue[int64]
		if ds, err = s.DeadValues(0, 2); err == nil && len(ds) > 0 {
			err = s.RequeueDeadValue(ds[0])
		}
	case i%13 == 0:
		err = s.Compact()
	}
	return n, err
}

// inspectSortedLive opens dir read-only as a sorted queue and checks every
// dead value it lists, and that the pending values it counts per key add
// up to its Stats.
func inspectSortedLive(dir string) (int, error) {
	r, err := queue.OpenSorted[int64](dir, &queue.SortedOptions{Options: queue.Options{ReadOnly: true}})
	if err != nil {
		return 0, err
	}
	defer r.Close()
	dead, err := r.DeadValues(0, 0)
	if err != nil {
		return 0, fmt.Errorf("dead values: %w", err)
	}
	for _, d := range dead {
		if string(d.Payload) != sortedLiveBody(d.Key, d.Sort) {
			return 0, fmt.Errorf("%w: dead value %d (%s/%d): payload %.40q", errWrong, d.Seq, d.Key, d.Sort, d.Payload)
		}
	}
	pending := 0
	for after := ""; ; {
		keys, err := r.Keys(after, 100)
		if err != nil {
			return 0, fmt.Errorf("keys: %w", err)
		}
		if len(keys) == 0 {
			break
		}
		for _, k := range keys {
			pending += k.Values
		}
		after = keys[len(keys)-1].Key
	}
	if st := r.Stats(); pending != st.SortedPending || len(dead) != st.SortedDead {
		return 0, fmt.Errorf("%w: the keys hold %d pending values and %d are dead, Stats counts %d and %d", errWrong,
			pending, len(dead), st.SortedPending, st.SortedDead)
	}
	return len(dead), readLogSortedSample(dir, 2000)
}

// readLogSortedSample reads the first n records of dir's log and checks
// the payload of every publish.
func readLogSortedSample(dir string, n int) error {
	return sampleLog(dir, n, func(rec queue.Record) bool {
		sort, ok := rec.Sort.(int64)
		return !ok || rec.Payload == nil || string(rec.Payload) == sortedLiveBody(rec.Key, sort)
	})
}
