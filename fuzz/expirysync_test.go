package fuzz_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/walq/walq/internal/crashfs"
	"github.com/walq/walq/queue"
)

// TestRequeueExpiredIsDurable crashes a run at each of its durable
// operations: an enqueue (a publish), a delivery, the lease running out
// and RequeueExpired, then Close. Under SyncAlways a call returns after the
// fsync that covers its records, so when RequeueExpired returned the lease
// it ended, every power-loss state holds that end: the next Open finds no
// lease of a crashed process to end (Recovery.Requeued is 0).
func TestRequeueExpiredIsDurable(t *testing.T) {
	for _, c := range []struct {
		name string
		run  func(dir string, o queue.Options, advance func()) (int, error)
	}{
		{"queue", expireQueue},
		{"sorted", expireSorted},
	} {
		t.Run(c.name, func(t *testing.T) {
			checked := 0
			for crashAt := 1; ; crashAt++ {
				n, done, err := expireCrashPoint(t, crashAt, c.run)
				if err != nil {
					t.Fatalf("crash at durable operation %d: %v", crashAt, err)
				}
				checked += n
				if done {
					break
				}
			}
			if checked == 0 {
				t.Fatal("no crash came after RequeueExpired returned")
			}
			t.Logf("%d power-loss states after RequeueExpired returned", checked)
		})
	}
}

// expireCrashPoint runs the calls on a file system that crashes at durable
// operation crashAt and checks the states of the crash when RequeueExpired
// returned before it. done says the run made fewer durable operations.
func expireCrashPoint(t *testing.T, crashAt int, run func(string, queue.Options, func()) (int, error)) (int, bool, error) {
	root := scratchDir(t)
	fsys, err := crashfs.New(root, crashAt)
	if err != nil {
		return 0, false, err
	}
	clock := newManualClock()
	o := queue.Options{Sync: queue.SyncAlways, AckTimeout: time.Second, ManualRequeue: true,
		MaxDeliveries: -1, SnapshotBytes: 1 << 30, Clock: clock, FS: fsys}
	ended, err := run(filepath.Join(root, "q"), o, func() { clock.Advance(2 * time.Second) })
	if !fsys.Crashed() {
		return 0, true, err // the run ended before durable operation crashAt
	}
	if ended != 1 {
		return 0, false, nil // the crash came before RequeueExpired returned
	}
	if err := fsys.Image(); err != nil {
		return 0, false, err
	}
	const states = 20
	for v := range states {
		dst := filepath.Join(scratchDir(t), "state")
		st, err := fsys.Materialize(dst, rand.New(rand.NewPCG(uint64(crashAt), uint64(v))))
		if err != nil {
			return v, false, err
		}
		q, err := queue.Open(filepath.Join(dst, "q"), &queue.Options{ReadOnly: true, Clock: clock})
		if err != nil {
			return v, false, fmt.Errorf("state %d (%s): %w", v, st.Desc, err)
		}
		st2 := q.Stats()
		leased := st2.InFlight + int64(st2.SortedLeased)
		q.Close()
		os.RemoveAll(dst)
		if leased != 0 {
			return v, false, fmt.Errorf("state %d (%s): RequeueExpired returned 1 ended lease, the recovered log still holds %d", v, st.Desc, leased)
		}
	}
	return states, false, nil
}

// expireQueue enqueues, dequeues, lets the lease run out and ends it; it
// returns what RequeueExpired returned (0 when the crash came before).
func expireQueue(dir string, o queue.Options, advance func()) (int, error) {
	q, err := queue.Open(dir, &o)
	if err != nil {
		return 0, err
	}
	defer q.Close()
	if _, err := q.Enqueue(context.Background(), []byte("x")); err != nil {
		return 0, err
	}
	if _, err := q.TryDequeue(); err != nil {
		return 0, err
	}
	advance()
	n, err := q.RequeueExpired()
	if err != nil {
		return 0, err
	}
	return n, q.Close()
}

// expireSorted is expireQueue for a sorted queue's batch.
func expireSorted(dir string, o queue.Options, advance func()) (int, error) {
	s, err := queue.OpenSorted[int64](dir, &queue.SortedOptions{Options: o})
	if err != nil {
		return 0, err
	}
	defer s.Close()
	if err := s.Publish(context.Background(), 1, "k", []byte("x")); err != nil {
		return 0, err
	}
	if _, err := s.TryPull(1); err != nil {
		return 0, err
	}
	advance()
	n, err := s.RequeueExpired()
	if err != nil {
		return 0, err
	}
	return n, s.Close()
}
