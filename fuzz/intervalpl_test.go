package fuzz_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/walq/walq/internal/crashfs"
	"github.com/walq/walq/queue"
)

// TestSyncIntervalPowerLossKeepsOlderCalls holds SyncInterval to the bound
// its documentation gives: a power loss loses at most the last interval.
// A call of each kind (Enqueue, EnqueueAsync, Ack, AckAsync, SettleAsync)
// returns right after another call's fsync, so that no fsync of its own
// is made at once, then the queue stays idle for many intervals before
// the power goes (internal/crashfs keeps only what was fsynced):
// with no later call to carry an fsync, the interval's own fsync must
// have covered every one of them. Every state the loss can leave must
// hold the enqueues and none of the acked messages.
func TestSyncIntervalPowerLossKeepsOlderCalls(t *testing.T) {
	const interval = 20 * time.Millisecond
	for _, c := range []struct {
		name string
		last func(ctx context.Context, q *queue.Queue) (acked []string, err error)
	}{
		{"enqueue", func(ctx context.Context, q *queue.Queue) ([]string, error) {
			_, err := q.Enqueue(ctx, payload("last", 8))
			return nil, err
		}},
		{"enqueue-async", func(ctx context.Context, q *queue.Queue) ([]string, error) {
			p, err := q.EnqueueAsync(ctx, payload("last", 8))
			if err != nil {
				return nil, err
			}
			return nil, p.Wait(ctx)
		}},
		{"ack", func(ctx context.Context, q *queue.Queue) ([]string, error) {
			m, err := q.TryDequeue()
			if err != nil {
				return nil, err
			}
			return []string{tokenOf(m.Payload)}, m.Ack()
		}},
		{"ack-async", func(ctx context.Context, q *queue.Queue) ([]string, error) {
			m, err := q.TryDequeue()
			if err != nil {
				return nil, err
			}
			p, err := q.AckAsync(m.Receipt)
			if err != nil {
				return nil, err
			}
			return []string{tokenOf(m.Payload)}, p.Wait(ctx)
		}},
		{"settle-async", func(ctx context.Context, q *queue.Queue) ([]string, error) {
			ms, err := q.DequeueBatch(ctx, 2)
			if err != nil {
				return nil, err
			}
			p, err := q.SettleAsync(queue.Settlement{Receipt: ms[0].Receipt, Op: queue.SettleAck},
				queue.Settlement{Receipt: ms[1].Receipt, Op: queue.SettleAck})
			if err != nil {
				return nil, err
			}
			return []string{tokenOf(ms[0].Payload), tokenOf(ms[1].Payload)}, p.Wait(ctx)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := scratchDir(t)
			fsys, err := crashfs.New(root, 0)
			if err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join(root, "q")
			want, err := intervalRun(dir, queue.Options{Sync: queue.SyncInterval, SyncInterval: interval,
				SnapshotBytes: 1 << 30, FS: fsys}, 15*interval, c.last)
			if err != nil {
				t.Fatal(err)
			}
			drainStates(t, fsys, 0, func(v int, st crashfs.State, tokens []string) {
				got := slices.Sorted(slices.Values(tokens))
				if !slices.Equal(got, want) {
					t.Fatalf("state %d (%s): drained %v, want %v: a call returned at least %v before the power loss and its record was not fsynced",
						v, st.Desc, got, want, 15*interval)
				}
			})
		})
	}
}

// intervalRun enqueues a few messages through Enqueue and EnqueueBatch,
// makes the call last, then leaves the queue idle for idle and takes the
// power-loss image. It returns the tokens that must survive, sorted.
func intervalRun(dir string, o queue.Options, idle time.Duration,
	last func(context.Context, *queue.Queue) ([]string, error)) ([]string, error) {
	ctx := context.Background()
	q, err := queue.Open(dir, &o)
	if err != nil {
		return nil, err
	}
	defer q.Close() // fails once the image is taken: the file system is gone
	live := []string{"e0", "e1", "e2", "e3"}
	if _, err := q.Enqueue(ctx, payload("e0", 8)); err != nil {
		return nil, err
	}
	if _, err := q.EnqueueBatch(ctx, []queue.Item{{Payload: payload("e1", 8)},
		{Payload: payload("e2", 8)}, {Payload: payload("e3", 8)}}); err != nil {
		return nil, err
	}
	// Let the interval's fsync cover the enqueues, so that what follows
	// alone is at stake.
	time.Sleep(idle)
	// A write right after another is left to the interval's timer: the
	// first one after the idle time is fsynced at once, the next not.
	if _, err := q.Enqueue(ctx, payload("pre", 8)); err != nil {
		return nil, err
	}
	live = append(live, "pre")
	acked, err := last(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("the last call: %w", err)
	}
	if len(acked) == 0 {
		live = append(live, "last")
	}
	synced := datasyncs(fsys(o))
	time.Sleep(idle)
	// On a loaded machine the interval's timer may fire late: give it
	// time, judged by the fdatasync calls the file system received. A
	// timer that never fires fails the drain all the same.
	for deadline := time.Now().Add(10 * time.Second); datasyncs(fsys(o)) == synced && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if err := fsys(o).Image(); err != nil {
		return nil, err
	}
	live = slices.DeleteFunc(live, func(tok string) bool { return slices.Contains(acked, tok) })
	slices.Sort(live)
	return live, nil
}

func fsys(o queue.Options) *crashfs.FS { return o.FS.(*crashfs.FS) }

// datasyncs returns how many file fsyncs (fsync or fdatasync) fs received.
func datasyncs(fs *crashfs.FS) int {
	_, kinds := fs.Ops()
	return kinds["fsync"] + kinds["fdatasync"]
}

// TestSyncNeverPowerLossKeepsCallsBeforeRoll holds SyncNever to its
// documented bound: a power loss loses what was written since the last
// segment roll-over (or snapshot, or Close), not more. Enqueues and acks,
// one call at a time, roll the log over several times; each time a call
// adds a segment file (seen in the directory, not in the engine's
// accounts), every call that returned before that one is covered. The
// image is then taken with the last calls unsynced, and every state must
// hold the covered enqueues that no call acked, and none of the messages
// a covered call acked.
func TestSyncNeverPowerLossKeepsCallsBeforeRoll(t *testing.T) {
	ctx := context.Background()
	root := scratchDir(t)
	fs, err := crashfs.New(root, 0)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "q")
	const segSize = 4 << 10
	q, err := queue.Open(dir, &queue.Options{Sync: queue.SyncNever, SegmentSize: segSize,
		SnapshotBytes: 1 << 30, FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close() // fails once the image is taken
	var (
		returned []string // every call that returned, in order: "+tok" enqueued, "-tok" acked
		covered  int      // returned[:covered] came before a roll
		rolls    int      // roll-overs seen
		files    = segFiles(t, dir)
	)
	for i := 0; rolls < 4 || len(returned) < covered+8; i++ {
		tok := fmt.Sprintf("m%03d", i)
		before := len(returned)
		if i%3 == 2 {
			m, err := q.TryDequeue()
			if err != nil {
				t.Fatal(err)
			}
			if err := m.Ack(); err != nil {
				t.Fatal(err)
			}
			returned = append(returned, "-"+tokenOf(m.Payload))
		} else {
			if _, err := q.Enqueue(ctx, payload(tok, 200)); err != nil {
				t.Fatal(err)
			}
			returned = append(returned, "+"+tok)
		}
		if n := segFiles(t, dir); n > files {
			files, covered = n, before
			rolls++
		}
	}
	if err := fs.Image(); err != nil {
		t.Fatal(err)
	}
	// want: enqueued before a roll and not acked by any call (an ack
	// after the last roll may survive or not); acked: acked before one.
	want, acked := map[string]bool{}, map[string]bool{}
	for i, c := range returned {
		switch {
		case c[0] == '+' && i < covered:
			want[c[1:]] = true
		case c[0] == '-':
			delete(want, c[1:])
			if i < covered {
				acked[c[1:]] = true
			}
		}
	}
	t.Logf("%d calls, %d covered by %d roll-overs", len(returned), covered, rolls)
	drainStates(t, fs, segSize, func(v int, st crashfs.State, tokens []string) {
		got := map[string]bool{}
		for _, tok := range tokens {
			got[tok] = true
		}
		for tok := range want {
			if !got[tok] {
				t.Fatalf("state %d (%s): %s, enqueued before a roll-over, lost", v, st.Desc, tok)
			}
		}
		for tok := range acked {
			if got[tok] {
				t.Fatalf("state %d (%s): %s, acked before a roll-over, delivered again", v, st.Desc, tok)
			}
		}
	})
}

// drainStates materializes the power-loss states of fs's image (24, 4
// under -race), drains the queue "q" of each with the writer's SegmentSize
// segSize (0: the default), as its application reopens it, and calls
// check with the tokens drained; a state with a hole may be refused with
// ErrCorrupt (State.MayRefuse), any other error fails the test.
func drainStates(t *testing.T, fs *crashfs.FS, segSize int64, check func(v int, st crashfs.State, tokens []string)) {
	t.Helper()
	for v := range scaled(24, 4) {
		dst := filepath.Join(scratchDir(t), "state")
		st, err := fs.Materialize(dst, rand.New(rand.NewPCG(47, uint64(v))))
		if err != nil {
			t.Fatal(err)
		}
		o := drainOptionsAs(segSize)
		d, err := drainWith(filepath.Join(dst, "q"), o)
		refusable := st.MayRefuse(dst)
		os.RemoveAll(dst)
		if err != nil && refusable && errors.Is(err, queue.ErrCorrupt) {
			continue // a hole: refused, never opened wrong
		}
		if err != nil {
			t.Fatalf("state %d (%s): %v", v, st.Desc, err)
		}
		check(v, st, d.tokens)
	}
}

// segFiles counts the segment files in the queue directory's log.
func segFiles(t *testing.T, dir string) int {
	t.Helper()
	des, err := os.ReadDir(filepath.Join(dir, "log"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, de := range des {
		if name := de.Name(); len(name) == 20 && strings.Trim(name, "0123456789") == "" {
			n++
		}
	}
	return n
}
