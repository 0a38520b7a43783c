package fuzz_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/walq/walq/internal/crashfs"
	"github.com/walq/walq/queue"
)

// TestStaleDeadValueAfterPowerLoss: a sorted queue names a dead value by
// its Seq, the LSN of its publish. Under SyncNever a power loss can take a
// publish and its dead-lettering while an operator holds the name (read
// from DeadValues, walq dlq list, the dashboard), and the next run gives
// the LSN to another publish. Requeued or purged by that name, the other
// value came back from the dead set, or went for good. The fenced forms
// (RequeueDeadValue, PurgeDeadValue) must refuse the stale name with
// ErrNotFound and leave the other value dead; the name read in this run
// must still work.
func TestStaleDeadValueAfterPowerLoss(t *testing.T) {
	ctx := context.Background()
	root := scratchDir(t)
	dir := filepath.Join(root, "q")
	o := queue.SortedOptions{Options: queue.Options{Sync: queue.SyncAlways, ManualRequeue: true}}
	s, err := queue.OpenSorted[int64](dir, &o)
	must(t, err)
	must(t, s.Publish(ctx, 1, "a", payload("A", 10)))
	must(t, s.Close())

	// Run 2, under SyncNever on the crash file system: b is published and
	// dead-lettered; nothing is made durable after the open, so the
	// directory as the open left it is a state a power loss can leave.
	fsys, err := crashfs.New(root, 0)
	must(t, err)
	o2 := o
	o2.Sync, o2.FS = queue.SyncNever, fsys
	o2.AppendOnly = true // no zeros fsynced ahead of the tail: nothing durable
	s, err = queue.OpenSorted[int64](dir, &o2)
	must(t, err)
	opened, _ := fsys.Ops()
	img, err := readDir(dir)
	must(t, err)
	must(t, s.Publish(ctx, 2, "b", payload("B", 10)))
	deadLetterNext(t, s, "b")
	dv, err := s.DeadValues(0, 0)
	must(t, err)
	if len(dv) != 1 || dv[0].Key != "b" {
		t.Fatalf("run 2 dead set %+v, want b alone", dv)
	}
	stale := dv[0]
	if n, _ := fsys.Ops(); n != opened {
		t.Fatalf("run 2 made %d operations durable; the test needs none", n-opened)
	}
	if err := s.Close(); err != nil {
		t.Logf("close on the crash fs: %v", err)
	}

	// Run 3 on the state the power loss left: c takes b's LSN and dies.
	dir3 := filepath.Join(scratchDir(t), "r")
	must(t, writeDir(dir3, img))
	s, err = queue.OpenSorted[int64](dir3, &o)
	must(t, err)
	defer s.Close()
	must(t, s.Publish(ctx, 0, "c", payload("C", 10)))
	deadLetterNext(t, s, "c")
	dv, err = s.DeadValues(0, 0)
	must(t, err)
	if len(dv) != 1 || dv[0].Key != "c" || dv[0].Seq != stale.Seq {
		t.Fatalf("run 3 dead set %+v; the test needs c alone under b's seq %d", dv, stale.Seq)
	}
	if dv[0].PublishedAt.Equal(stale.PublishedAt) {
		t.Fatalf("c and the lost b were both published at %v; the name cannot tell them apart", stale.PublishedAt)
	}
	for name, change := range map[string]func(queue.DeadValue[int64]) error{
		"RequeueDeadValue": s.RequeueDeadValue, "PurgeDeadValue": s.PurgeDeadValue,
	} {
		if err := change(stale); !errors.Is(err, queue.ErrNotFound) {
			t.Fatalf("%s of the lost b (seq %d) acted on c: %v; want ErrNotFound", name, stale.Seq, err)
		}
		now, err := s.DeadValues(0, 0)
		must(t, err)
		if len(now) != 1 || now[0].Key != "c" || now[0].Reason != "bad c" {
			t.Fatalf("after %s of the stale name the dead set is %+v, want c as it was", name, now)
		}
	}
	bs, err := s.TryPull(10)
	must(t, err)
	if len(bs) != 1 || bs[0].Key != "a" {
		t.Fatalf("pulled %d batches (%v); want a alone, c dead", len(bs), batchKeys(bs))
	}
	must(t, bs[0].Ack())
	// The name read in this run is c's, and works.
	must(t, s.RequeueDeadValue(dv[0]))
	d := drainSortedTokens(t, s)
	if d["C"] != 1 || len(d) != 1 {
		t.Fatalf("after c's requeue the queue delivered %v, want C once", d)
	}
}

// deadLetterNext pulls the ready batches of s, dead-letters key's with
// the reason "bad <key>" and gives the others back.
func deadLetterNext(t *testing.T, s *queue.Sorted[int64], key string) {
	t.Helper()
	bs, err := s.TryPull(10)
	must(t, err)
	found := false
	for _, b := range bs {
		if b.Key == key {
			found = true
			must(t, b.DeadLetter("bad "+key))
		} else {
			must(t, b.Nack(0))
		}
	}
	if !found {
		t.Fatalf("no batch of %s among %v", key, batchKeys(bs))
	}
}

func batchKeys(bs []*queue.Batch[int64]) []string {
	out := make([]string, len(bs))
	for i, b := range bs {
		out[i] = b.Key
	}
	return out
}
