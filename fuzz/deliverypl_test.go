package fuzz_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/walq/walq/internal/crashfs"
	"github.com/walq/walq/internal/fakeclock"
	"github.com/walq/walq/queue"
)

// TestPowerLossTakesBackADelivery checks what the README's durability
// table says of deliveries under SyncAlways: Dequeue, DequeueBatch and a
// sorted or windowed Pull return once their lease is written, before it
// is fsynced, and the ack's fsync covers it. Two messages are put (their
// calls returned: fsynced) and delivered by one call; the power goes as
// that call returns, or once the ack of what it delivered returns. Of the
// states a power loss can leave:
//
//   - after the delivery, every one delivers both messages again, each
//     with its delivery count 1 (the lease was lost) or 2 (it was kept),
//     and refuses the lost delivery's receipts with ErrLeaseLost; and
//     some state loses the lease (the window the README names is real);
//   - after the ack, none delivers anything again.
func TestPowerLossTakesBackADelivery(t *testing.T) {
	const states = 40
	for _, c := range []struct {
		name string
		run  plDeliveryRun
	}{
		{"Dequeue", plDequeue(false)},
		{"DequeueBatch", plDequeue(true)},
		{"Pull", plPull(0)},
		{"windowed Pull", plPull(time.Second)},
	} {
		for _, ack := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/ack=%v", c.name, ack), func(t *testing.T) {
				n := plDeliveryStates(t, c.run, ack, states)
				t.Logf("of %d states: %d lost the lease, %d kept it, %d delivered nothing again, %d refused as damaged",
					states, n.lost, n.kept, n.none, n.damaged)
				if !ack && n.lost == 0 {
					t.Fatalf("no state of %d lost the lease of a delivery that returned before its fsync", states)
				}
				if ack && n.none == 0 {
					t.Fatalf("no state of %d opened", states)
				}
			})
		}
	}
}

// plDeliveryRun puts two messages (tokens "a" and "b") in a queue opened
// in dir with o, delivers both in one call, acks them if ack, and calls
// powerLoss as the last of those calls returns. It returns the check of a
// directory the power loss left: it opens it with o2, tries the lost
// delivery's receipts, drains it and returns each token's delivery count.
type plDeliveryRun func(t *testing.T, dir string, o queue.Options, ack bool, powerLoss func()) func(dir string, o2 queue.Options) (map[string]int, error)

// plOutcomes counts the states of a power loss by what they delivered.
type plOutcomes struct {
	lost    int // both messages, with their lease lost
	kept    int // both messages, with their lease kept
	none    int // nothing
	damaged int // refused with ErrCorrupt (a hole in the unsynced bytes)
}

// plDeliveryStates runs run on a crash file system and checks states of
// the power loss.
func plDeliveryStates(t *testing.T, run plDeliveryRun, ack bool, states int) plOutcomes {
	root := scratchDir(t)
	fsys, err := crashfs.New(root, 0)
	must(t, err)
	clock := newManualClock()
	o := queue.Options{Sync: queue.SyncAlways, ManualRequeue: true, MaxDeliveries: -1, AckTimeout: time.Hour,
		SnapshotBytes: 1 << 30, Clock: clock, FS: fsys}
	check := run(t, filepath.Join(root, "q"), o, ack, func() { must(t, fsys.Image()) })
	o2 := queue.Options{Sync: queue.SyncNever, ManualRequeue: true, MaxDeliveries: -1, AckTimeout: time.Hour, Clock: clock}
	var n plOutcomes
	for v := range states {
		dst := filepath.Join(scratchDir(t), "state")
		st, err := fsys.Materialize(dst, rand.New(rand.NewPCG(uint64(v), 7)))
		must(t, err)
		got, err := check(filepath.Join(dst, "q"), o2)
		refusable := st.MayRefuse(dst)
		os.RemoveAll(dst)
		switch {
		case err != nil && refusable && errors.Is(err, queue.ErrCorrupt):
			n.damaged++
		case err != nil:
			t.Fatalf("state %d (%s): %v", v, st.Desc, err)
		case ack && len(got) != 0:
			t.Fatalf("state %d (%s): delivered again after the ack returned: %v (token: its count)", v, st.Desc, got)
		case ack:
			n.none++
		case len(got) != 2 || got["a"] != got["b"] || got["a"] < 1 || got["a"] > 2:
			t.Fatalf("state %d (%s): delivered %v (token: its count); want a and b, both 1 or both 2", v, st.Desc, got)
		case got["a"] == 1:
			n.lost++
		default:
			n.kept++
		}
	}
	return n
}

// plDequeue is a plDeliveryRun of an ack queue: one DequeueBatch of both
// messages if batch, else a Dequeue of each (the power goes as the
// second returns).
func plDequeue(batch bool) plDeliveryRun {
	return func(t *testing.T, dir string, o queue.Options, ack bool, powerLoss func()) func(string, queue.Options) (map[string]int, error) {
		ctx := context.Background()
		q, err := queue.Open(dir, &o)
		must(t, err)
		mustEnqueue(t, q, payload("a", 10))
		mustEnqueue(t, q, payload("b", 10))
		var ms queue.Messages
		if batch {
			ms, err = q.DequeueBatch(ctx, 2)
			must(t, err)
		} else {
			for range 2 {
				m, err := q.Dequeue(ctx)
				must(t, err)
				ms = append(ms, m)
			}
		}
		if len(ms) != 2 {
			t.Fatalf("delivered %d messages, want 2", len(ms))
		}
		if ack {
			must(t, ms.Ack())
		}
		powerLoss()
		plClosed(t, q.Close())
		stale := ms.Receipts()
		return func(dir string, o2 queue.Options) (map[string]int, error) {
			q, err := queue.Open(dir, &o2)
			if err != nil {
				return nil, err
			}
			defer q.Close()
			if !ack {
				for _, r := range stale {
					if err := q.Ack(r); !errors.Is(err, queue.ErrLeaseLost) {
						return nil, fmt.Errorf("the receipt %s of the lost delivery: %v; want ErrLeaseLost", r, err)
					}
				}
			}
			got := make(map[string]int)
			for {
				m, err := q.TryDequeue()
				if errors.Is(err, queue.ErrEmpty) {
					return got, nil
				}
				if err != nil {
					return nil, err
				}
				got[tokenOf(m.Payload)] = m.Deliveries
				if err := m.Ack(); err != nil {
					return nil, err
				}
			}
		}
	}
}

// plPull is a plDeliveryRun of a sorted queue (window 0) or a windowed
// one: both values are published to one key and pulled as its batch.
func plPull(window time.Duration) plDeliveryRun {
	return func(t *testing.T, dir string, o queue.Options, ack bool, powerLoss func()) func(string, queue.Options) (map[string]int, error) {
		ctx := context.Background()
		s, err := plOpenSorted(dir, o, window)
		must(t, err)
		for _, tok := range []string{"a", "b"} {
			if window > 0 {
				must(t, s.publishTime(ctx, tok))
			} else {
				must(t, s.Publish(ctx, int64(tok[0]), "k", payload(tok, 10)))
			}
		}
		o.Clock.(*fakeclock.Clock).Advance(2 * window)
		bs, err := s.TryPull(2)
		must(t, err)
		if len(bs) != 1 || len(bs[0].Values) != 2 {
			t.Fatalf("pulled %d batches, want one of 2 values", len(bs))
		}
		if ack {
			must(t, bs[0].Ack())
		}
		powerLoss()
		plClosed(t, s.Close())
		stale := bs[0].Receipt
		return func(dir string, o2 queue.Options) (map[string]int, error) {
			s, err := plOpenSorted(dir, o2, window)
			if err != nil {
				return nil, err
			}
			defer s.Close()
			if !ack {
				if err := s.ackBatch(stale); !errors.Is(err, queue.ErrLeaseLost) {
					return nil, fmt.Errorf("the receipt %s of the lost pull: %v; want ErrLeaseLost", stale, err)
				}
			}
			return s.drain()
		}
	}
}

// plSorted is a sorted queue of int64 keys, or a windowed queue, as
// plPull uses them.
type plSorted struct {
	*queue.Sorted[int64]
	w *queue.Windowed
}

func plOpenSorted(dir string, o queue.Options, window time.Duration) (plSorted, error) {
	if window == 0 {
		s, err := queue.OpenSorted[int64](dir, &queue.SortedOptions{Options: o})
		return plSorted{Sorted: s}, err
	}
	w, err := queue.OpenWindowed(dir, &queue.WindowOptions{Window: window, SortedOptions: queue.SortedOptions{Options: o}})
	return plSorted{w: w}, err
}

func (s plSorted) publishTime(ctx context.Context, tok string) error {
	return s.w.Publish(ctx, "k", payload(tok, 10))
}

func (s plSorted) TryPull(max int) ([]plBatch, error) {
	var out []plBatch
	if s.w == nil {
		bs, err := s.Sorted.TryPull(max)
		for _, b := range bs {
			out = append(out, plBatch{Receipt: b.Receipt, Values: deliveriesOf(b.Values), ack: b.Ack})
		}
		return out, err
	}
	bs, err := s.w.TryPull(max)
	for _, b := range bs {
		out = append(out, plBatch{Receipt: b.Receipt, Values: deliveriesOf(b.Values), ack: b.Ack})
	}
	return out, err
}

func (s plSorted) ackBatch(r queue.BatchReceipt) error {
	if s.w == nil {
		return s.Sorted.Ack(r)
	}
	return s.w.Ack(r)
}

func (s plSorted) Close() error {
	if s.w == nil {
		return s.Sorted.Close()
	}
	return s.w.Close()
}

// drain pulls and acks every value and returns each token's delivery count.
func (s plSorted) drain() (map[string]int, error) {
	got := make(map[string]int)
	for {
		bs, err := s.TryPull(100)
		if errors.Is(err, queue.ErrEmpty) {
			return got, nil
		}
		if err != nil {
			return nil, err
		}
		for _, b := range bs {
			for tok, n := range b.Values {
				got[tok] = n
			}
			if err := b.ack(); err != nil {
				return nil, err
			}
		}
	}
}

// plBatch is a pulled batch of either kind: its receipt, its values'
// delivery counts by token, and its Ack.
type plBatch struct {
	Receipt queue.BatchReceipt
	Values  map[string]int
	ack     func() error
}

func (b plBatch) Ack() error { return b.ack() }

func deliveriesOf[K queue.SortKey](vs []queue.Value[K]) map[string]int {
	out := make(map[string]int, len(vs))
	for _, v := range vs {
		out[tokenOf(v.Payload)] = v.Deliveries
	}
	return out
}

// plClosed checks the Close of a queue whose file system lost power: it
// fails with crashfs.ErrCrashed, or succeeds when it had nothing to sync.
func plClosed(t *testing.T, err error) {
	t.Helper()
	if err != nil && !errors.Is(err, crashfs.ErrCrashed) {
		t.Fatalf("Close after the power loss: %v", err)
	}
}
