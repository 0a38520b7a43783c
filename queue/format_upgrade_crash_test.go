package queue_test

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

	"github.com/stretchr/testify/require"

	"github.com/walq/walq/internal/crashfs"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/wal"
)

// The format-1 directories in testdata were written by the release before
// format 2, with SegmentSize 4096, so that their logs span segments:
//
//   - format1-ack-rolled: an ack queue, m00 to m29 enqueued (each padded
//     with 300 dots), m00 to m09 dequeued and acked.
//   - format1-sorted: a sorted queue of int64 keys, v00 to v29 published at
//     sort keys 0 to 29 under keys k0, k1, k2 in turn (padded alike), and
//     key k0's batch pulled and acked.
//   - format1-windowed: a windowed queue, the same values, key k0's batch
//     pulled and acked.

// upgradeCase opens one fixture's kind of queue and drives it.
type upgradeCase struct {
	fixture string
	want    []string // what a drain of the fixture delivers, sorted
	open    func(dir string, fsys wal.FS) (upgradeQueue, error)
}

// upgradeQueue is the part of a queue the upgrade tests use.
type upgradeQueue interface {
	add(name string) error    // enqueue or publish name, durably
	drain() ([]string, error) // deliver and ack everything ready
	Close() error
}

type ackUpgrade struct{ q *queue.Queue }

func (a ackUpgrade) add(name string) error {
	_, err := a.q.Enqueue(context.Background(), []byte(name))
	return err
}

func (a ackUpgrade) drain() ([]string, error) {
	var out []string
	for {
		m, err := a.q.TryDequeue()
		if errors.Is(err, queue.ErrEmpty) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, strings.TrimRight(string(m.Payload), "."))
		if err := m.Ack(); err != nil {
			return out, err
		}
	}
}

func (a ackUpgrade) Close() error { return a.q.Close() }

// sortedUpgrade is a sorted or windowed queue; publish is its Publish.
type sortedUpgrade[K queue.SortKey] struct {
	s       *queue.Sorted[K]
	publish func(name string) error
}

func (s sortedUpgrade[K]) add(name string) error { return s.publish(name) }

func (s sortedUpgrade[K]) drain() ([]string, error) {
	var out []string
	for {
		bs, err := s.s.TryPull(100)
		if errors.Is(err, queue.ErrEmpty) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		for _, b := range bs {
			for _, v := range b.Values {
				out = append(out, b.Key+":"+strings.TrimRight(string(v.Payload), "."))
			}
			if err := b.Ack(); err != nil {
				return out, err
			}
		}
	}
}

func (s sortedUpgrade[K]) Close() error { return s.s.Close() }

// upgradeCases are the three kinds of format-1 directory.
func upgradeCases() []upgradeCase {
	var ack, sorted []string
	for i := 10; i < 30; i++ {
		ack = append(ack, fmt.Sprintf("m%02d", i))
	}
	for i := range 30 {
		if i%3 != 0 { // k0's batch was acked
			sorted = append(sorted, fmt.Sprintf("k%d:v%02d", i%3, i))
		}
	}
	slices.Sort(sorted)
	opts := func(fsys wal.FS) queue.Options { return queue.Options{SegmentSize: 4096, FS: fsys} }
	return []upgradeCase{
		{"format1-ack-rolled", ack, func(dir string, fsys wal.FS) (upgradeQueue, error) {
			o := opts(fsys)
			q, err := queue.Open(dir, &o)
			return ackUpgrade{q}, err
		}},
		{"format1-sorted", sorted, func(dir string, fsys wal.FS) (upgradeQueue, error) {
			s, err := queue.OpenSorted[int64](dir, &queue.SortedOptions{Options: opts(fsys)})
			next := int64(100)
			return sortedUpgrade[int64]{s, func(name string) error {
				next++
				return s.Publish(context.Background(), next, "new", []byte(name))
			}}, err
		}},
		{"format1-windowed", sorted, func(dir string, fsys wal.FS) (upgradeQueue, error) {
			w, err := queue.OpenWindowed(dir, &queue.WindowOptions{SortedOptions: queue.SortedOptions{Options: opts(fsys)},
				Window: time.Millisecond})
			if err != nil {
				return nil, err
			}
			return sortedUpgrade[time.Time]{w.Sorted, func(name string) error {
				return w.Publish(context.Background(), "new", []byte(name))
			}}, nil
		}},
	}
}

// copyTree copies the files under src to dst.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	require.NoError(t, filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o600)
	}))
}

// drainSorted drains q after the windows of what it holds ran out, and
// returns what it delivered, sorted.
func drainSorted(t *testing.T, q upgradeQueue) []string {
	t.Helper()
	time.Sleep(5 * time.Millisecond) // a windowed queue's 1 ms window
	got, err := q.drain()
	require.NoError(t, err)
	slices.Sort(got)
	return got
}

// TestFormat1UpgradeEveryKind: an ack, a sorted and a windowed queue that
// the release before format 2 wrote, over several segments, are raised to
// format 2 by a writable open; every message not acked then is delivered
// exactly once, the acked ones never, beside what was added since, and a
// reopen delivers nothing again.
func TestFormat1UpgradeEveryKind(t *testing.T) {
	for _, c := range upgradeCases() {
		t.Run(c.fixture, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "q")
			copyTree(t, filepath.Join("testdata", c.fixture), dir)
			q, err := c.open(dir, nil)
			require.NoError(t, err)
			id, err := queue.ReadIdentity(dir)
			require.NoError(t, err)
			require.Equal(t, queue.FormatVersion, id.Format)
			require.NoError(t, q.add("new1"))
			require.NoError(t, q.Close())

			q, err = c.open(dir, nil)
			require.NoError(t, err)
			want := slices.Clone(c.want)
			if strings.HasPrefix(want[0], "k") {
				want = append(want, "new:new1")
			} else {
				want = append(want, "new1")
			}
			slices.Sort(want)
			require.Equal(t, want, drainSorted(t, q))
			require.NoError(t, q.Close())

			q, err = c.open(dir, nil)
			require.NoError(t, err)
			require.Empty(t, drainSorted(t, q), "delivered again after its ack")
			require.NoError(t, q.Close())
			_, err = queue.Verify(dir, nil)
			require.NoError(t, err)
		})
	}
}

// TestFormat1UpgradeCrash: a power loss at each durable operation of the
// first writable open of a format-1 directory, and of the writes after it
// (the identity file's rewrite, the log's open and its first version-2
// entries), leaves a directory that opens with every message of the old
// log delivered exactly once, the acked ones never, each addition that
// returned nil present and none twice; and no state holds a log changed
// since the old release wrote it under an identity file still of format
// 1, which that release would take for its own.
func TestFormat1UpgradeCrash(t *testing.T) {
	const states = 3
	for _, c := range upgradeCases() {
		t.Run(c.fixture, func(t *testing.T) {
			old := files(t, filepath.Join("testdata", c.fixture))
			for crashAt := 1; ; crashAt++ {
				root := t.TempDir()
				copyTree(t, filepath.Join("testdata", c.fixture), filepath.Join(root, "q"))
				fsys, err := crashfs.New(root, crashAt)
				require.NoError(t, err)
				var added []string // additions that returned nil
				q, err := c.open(filepath.Join(root, "q"), fsys)
				if err == nil {
					for i := range 3 {
						name := fmt.Sprintf("new%d", i)
						if q.add(name) == nil {
							added = append(added, name)
						}
					}
					err = q.Close()
				}
				if !fsys.Crashed() {
					require.NoError(t, err)
					require.Greater(t, crashAt, 2, "no durable operation to crash at")
					t.Logf("%d durable operations, %d crash states each", crashAt-1, states)
					return
				}
				require.NoError(t, fsys.Image())
				for s := range states {
					seed := uint64(crashAt*100 + s)
					dst := filepath.Join(t.TempDir(), "q")
					_, err := fsys.Materialize(dst, rand.New(rand.NewPCG(seed, 19)))
					require.NoError(t, err)
					checkUpgradeState(t, c, filepath.Join(dst, "q"), old, added,
						fmt.Sprintf("crash at durable op %d, state seed %d", crashAt, seed))
				}
			}
		})
	}
}

// checkUpgradeState checks one crash state of an upgrade (see
// TestFormat1UpgradeCrash).
func checkUpgradeState(t *testing.T, c upgradeCase, dir string, old map[string]string, added []string, where string) {
	t.Helper()
	id, err := queue.ReadIdentity(dir)
	require.NoError(t, err, where)
	if id.Format < queue.FormatVersion {
		for name, b := range files(t, dir) {
			if strings.HasPrefix(name, "log"+string(filepath.Separator)) && name != filepath.Join("log", "LOCK") {
				require.Equal(t, old[name], b, "%s: %s changed under an identity file of format %d", where, name, id.Format)
			}
		}
	}
	q, err := c.open(dir, nil)
	require.NoError(t, err, where)
	got := drainSorted(t, q)
	require.NoError(t, q.Close(), where)
	var news []string
	rest := got[:0:0]
	for _, g := range got {
		if n, ok := strings.CutPrefix(g, "new:"); ok {
			news = append(news, n)
		} else if strings.HasPrefix(g, "new") {
			news = append(news, g)
		} else {
			rest = append(rest, g)
		}
	}
	require.Equal(t, c.want, rest, "%s: the old log's messages", where)
	slices.Sort(news)
	require.Equal(t, len(news), len(slices.Compact(slices.Clone(news))), "%s: an addition delivered twice: %v", where, news)
	for _, a := range added {
		require.Contains(t, news, a, "%s: an addition that returned nil is lost", where)
	}
}
