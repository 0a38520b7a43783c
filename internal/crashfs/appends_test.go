package crashfs

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/walq/walq/queue"
)

// TestAppendsAsBefore checks that on workloads that only append (a queue
// enqueuing, acking, rolling segments and compacting, AppendOnly, at every crash
// point, synced always or never) the model builds, seed for seed, the very
// states the append-only model built: modelling overwrites changed
// nothing for the files they do not touch.
func TestAppendsAsBefore(t *testing.T) {
	// Under the race detector every crash point is still run and
	// compared, in two random states rather than six.
	statesPerPoint := 6
	if raceEnabled {
		statesPerPoint = 2
	}
	for name, mode := range map[string]queue.SyncMode{"always": queue.SyncAlways, "never": queue.SyncNever} {
		t.Run(name, func(t *testing.T) {
			points, states := 0, 0
			for k := 1; ; k++ {
				fsys, done := runQueueWorkload(t, mode, k)
				if rewritten := fsys.rewritten(); rewritten != "" {
					t.Fatalf("crash point %d: %s was rewritten in place: the workload is not append-only", k, rewritten)
				}
				for v := range statesPerPoint {
					seed := uint64(k)<<8 | uint64(v)
					a, b := filepath.Join(t.TempDir(), "s"), filepath.Join(t.TempDir(), "s")
					got, err := fsys.Materialize(a, rand.New(rand.NewPCG(3, seed)))
					if err != nil {
						t.Fatal(err)
					}
					want, err := fsys.materializeAppends(b, rand.New(rand.NewPCG(3, seed)))
					if err != nil {
						t.Fatal(err)
					}
					got.Holed = nil // the append-only model names no holed files
					if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(tree(t, a), tree(t, b)) {
						t.Fatalf("crash point %d, seed %d: the state differs from the append-only model's\ngot:  %+v\nwant: %+v", k, seed, got, want)
					}
					states++
				}
				points++
				if done {
					break
				}
			}
			t.Logf("%d crash points, %d states, all as before", points, states)
		})
	}
}

// rewritten names a file whose synced bytes (up to its size now) were
// changed since its sync, or returns "".
func (fsys *FS) rewritten() string {
	fsys.mu.Lock()
	defer fsys.mu.Unlock()
	for dir, names := range fsys.mu.image {
		for name, ino := range names {
			cur, ok := fsys.mu.content[ino]
			n := min(len(cur), len(ino.synced))
			if ok && !bytes.Equal(cur[:n], ino.synced[:n]) {
				return filepath.Join(dir, name)
			}
		}
	}
	return ""
}

// runQueueWorkload runs a queue on an FS that crashes at durable operation
// k and takes its image; done says the workload ended before it.
func runQueueWorkload(t *testing.T, mode queue.SyncMode, k int) (*FS, bool) {
	t.Helper()
	root := t.TempDir()
	fsys, err := New(root, k)
	if err != nil {
		t.Fatal(err)
	}
	q, err := queue.Open(filepath.Join(root, "q"), &queue.Options{Sync: mode, SegmentSize: 4096, SnapshotBytes: 6000, FS: fsys, AppendOnly: true})
	if err == nil {
		err = queueSteps(q, rand.New(rand.NewPCG(uint64(mode), 11)))
		if cerr := q.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil && !errors.Is(err, ErrCrashed) && !fsys.Crashed() {
		t.Fatal(err)
	}
	done := !fsys.Crashed()
	if err := fsys.Image(); err != nil {
		t.Fatal(err)
	}
	return fsys, done
}

// queueSteps enqueues, dequeues, acks, flushes and compacts until a call
// fails.
func queueSteps(q *queue.Queue, rng *rand.Rand) error {
	ctx := context.Background()
	for i := range 90 {
		var err error
		switch r := rng.IntN(10); {
		case r < 5:
			_, err = q.Enqueue(ctx, bytes.Repeat([]byte{byte('a' + i%26)}, 50+rng.IntN(400)))
		case r < 8:
			var m *queue.Message
			if m, err = q.TryDequeue(); err == nil {
				err = m.Ack()
			} else if errors.Is(err, queue.ErrEmpty) {
				err = nil
			}
		case r < 9:
			err = q.Flush(ctx)
		default:
			err = q.Compact()
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// tree returns every file under root and its bytes, directories as nil.
func tree(t *testing.T, root string) map[string][]byte {
	t.Helper()
	out := make(map[string][]byte)
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			out[p[len(root):]] = nil
			return err
		}
		b, err := os.ReadFile(p)
		out[p[len(root):]] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
