package queue_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/internal/faultfs"
	"github.com/walq/walq/queue"
)

// A write or fsync that fails while producers stream EnqueueAsync calls
// and a consumer streams AckAsync settles: once Close returned, every
// Pending is done, with success or the injected error (the same on every
// read), and a reopen holds every message whose enqueue succeeded and
// that no ack was appended for (a failed one may have been written), and
// none whose ack succeeded.
func TestAsyncCallsWhenAWriteFails(t *testing.T) {
	for round := range 6 {
		seedv := uint64(time.Now().UnixNano()) + uint64(round)
		t.Run(fmt.Sprint(round), func(t *testing.T) {
			t.Logf("seed %d", seedv)
			asyncFaultRace(t, rand.New(rand.NewPCG(seedv, 7)), []string{"fsync", "write-batch"}[round%2])
		})
	}
}

func asyncFaultRace(t *testing.T, rng *rand.Rand, kind string) {
	fsys := faultfs.New(0)
	dir := t.TempDir()
	q := open(t, dir, &queue.Options{FS: fsys, ManualRequeue: true, Sync: queue.SyncAlways, MaxPending: 32, SegmentSize: 4096,
		AckTimeout: 200 * time.Millisecond})
	ctx := context.Background()
	type enq struct {
		p       *queue.Pending
		payload string
	}
	var mu sync.Mutex
	var enqs []enq
	acks := map[string]*queue.Pending{} // payload -> its AckAsync
	held := map[string]error{}          // payload -> the error of an AckAsync that returned no Pending
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for g := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				payload := fmt.Sprintf("g%d-%d", g, i)
				p, err := q.EnqueueAsync(ctx, []byte(payload))
				if err != nil {
					if !errors.Is(err, faultfs.ErrInjected) && !errors.Is(err, queue.ErrClosed) {
						t.Errorf("EnqueueAsync: %v", err)
					}
					return
				}
				mu.Lock()
				enqs = append(enqs, enq{p, payload})
				mu.Unlock()
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			m, err := q.TryDequeue()
			if errors.Is(err, queue.ErrEmpty) {
				continue
			}
			if err != nil {
				t.Logf("TryDequeue: %v", err)
				return
			}
			p, err := m.AckAsync()
			if err != nil {
				mu.Lock()
				held[string(m.Payload)] = err
				mu.Unlock()
				return
			}
			mu.Lock()
			acks[string(m.Payload)] = p
			mu.Unlock()
		}
	}()
	time.Sleep(time.Duration(5+rng.IntN(20)) * time.Millisecond)
	fsys.FailNext(kind)
	time.Sleep(time.Duration(rng.IntN(30)) * time.Millisecond)
	closeErr := q.Close()
	close(stop)
	waitGroupWithin(t, &wg, 20*time.Second)
	_, hit := fsys.Hit()
	if hit {
		require.ErrorIs(t, closeErr, faultfs.ErrInjected)
	} else {
		require.NoError(t, closeErr)
	}
	outcome := func(what string, p *queue.Pending) error {
		select {
		case <-p.Done():
		default:
			t.Fatalf("%s: its Pending is not done after Close returned", what)
		}
		err := p.Err()
		if err != nil && !errors.Is(err, faultfs.ErrInjected) {
			t.Fatalf("%s: %v, neither success nor the injected failure", what, err)
		}
		require.Equal(t, err, p.Err(), "%s: a second read of the outcome", what)
		return err
	}
	want := map[string]bool{}
	for _, e := range enqs {
		if outcome("enqueue "+e.payload, e.p) == nil {
			want[e.payload] = true
		}
	}
	acked := map[string]bool{}
	for payload, p := range acks {
		// An ack that failed may have been written all the same (its
		// fsync failed after the write): its message may be gone.
		err := outcome("ack "+payload, p)
		delete(want, payload)
		if err == nil {
			acked[payload] = true
		}
	}
	q = open(t, dir, &queue.Options{ManualRequeue: true})
	defer q.Close()
	// A lease held at Close runs on after a reopen when Close's record
	// was written (a clean close) though its fsync failed: end it.
	time.Sleep(250 * time.Millisecond)
	_, err := q.RequeueExpired()
	require.NoError(t, err)
	for {
		m, err := q.TryDequeue()
		if errors.Is(err, queue.ErrEmpty) {
			break
		}
		require.NoError(t, err)
		require.False(t, acked[string(m.Payload)], "%s delivered after its ack succeeded", m.Payload)
		delete(want, string(m.Payload))
	}
	require.Empty(t, want, "messages whose enqueue succeeded and that were not acked are lost (%d enqueues, %d acks, hit %v, held %v)", len(enqs), len(acks), hit, held)
	t.Logf("%s: %d enqueues, %d acks, failure injected: %v", kind, len(enqs), len(acks), hit)
}
