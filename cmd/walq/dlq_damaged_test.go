package main_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
)

// damagedDeadQueue returns a queue directory with two dead letters:
// "broken", whose payload lies in a damaged sealed segment, and "healthy",
// in the next segment.
func damagedDeadQueue(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "q")
	q, err := queue.Open(dir, fixtureOptions())
	require.NoError(t, err)
	ctx := context.Background()
	pad := strings.Repeat("p", 600)
	enq := func(id, payload string) {
		_, err := q.Enqueue(ctx, []byte(payload+"|"+pad), queue.WithID(id))
		require.NoError(t, err)
	}
	enq("broken", "BROKEN")
	for i := range 7 {
		enq(fmt.Sprint("f", i), "filler") // fill the first segment
	}
	enq("healthy", "HEALTHY")
	for range 9 {
		m, err := q.TryDequeue()
		require.NoError(t, err)
		if strings.HasPrefix(m.ID, "f") {
			require.NoError(t, m.Ack())
			continue
		}
		require.NoError(t, m.DeadLetter("bad input"))
	}
	require.NoError(t, q.Close())
	segs := segments(t, dir)
	require.Greater(t, len(segs), 1, "the letters' segment is sealed")
	b, err := os.ReadFile(segs[0])
	require.NoError(t, err)
	i := bytes.Index(b, []byte("BROKEN|"))
	require.GreaterOrEqual(t, i, 0)
	b[i] ^= 0x20 // a bad sector
	require.NoError(t, os.WriteFile(segs[0], b, 0o600))
	return dir
}

// walq dlq requeue of a dead letter whose payload cannot be read made it
// ready, to fail again at each delivery. It is refused now (exit 2, the
// damage named), requeue --all requeues the others and says which it
// left, and purge still removes it.
func TestDLQRequeueDamaged(t *testing.T) {
	t.Run("one", func(t *testing.T) {
		dir := damagedDeadQueue(t)
		r := mustWalq(t, 2, "", "dlq", "requeue", dir, "broken")
		require.Contains(t, r.stderr, `dead letter "broken"`)
		require.Contains(t, r.stderr, "purge it")
		require.Empty(t, r.stdout)
		s := stats(t, dir)
		require.EqualValues(t, 2, s.Dead, "nothing requeued")
		require.Zero(t, s.Ready)
		require.Equal(t, "purged broken\n", mustWalq(t, 0, "", "dlq", "purge", dir, "broken").stdout)
		require.EqualValues(t, 1, stats(t, dir).Dead)
	})
	t.Run("all", func(t *testing.T) {
		dir := damagedDeadQueue(t)
		r := mustWalq(t, 2, "", "dlq", "requeue", "--all", dir)
		require.Equal(t, "requeued 1 dead letter\n", r.stdout)
		require.Contains(t, r.stderr, `dead letter "broken"`)
		s := stats(t, dir)
		require.EqualValues(t, 1, s.Dead)
		require.EqualValues(t, 1, s.Ready, "healthy")
		ds := jsonLines[deadJSON](t, mustWalq(t, 0, "", "dlq", "list", "--json", dir).stdout)
		require.Len(t, ds, 1)
		require.Equal(t, "broken", ds[0].ID)
	})
}

// The same for a sorted queue's dead value: requeue by its name or with
// --all leaves it dead (exit 2); purge removes it.
func TestDLQRequeueDamagedValue(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "q")
	o := &queue.SortedOptions{Options: *fixtureOptions()}
	sq, err := queue.OpenSorted[int64](dir, o)
	require.NoError(t, err)
	ctx := context.Background()
	pad := strings.Repeat("p", 600)
	require.NoError(t, sq.Publish(ctx, 1, "broken", []byte("BROKEN|"+pad)))
	bs, err := sq.TryPull(1)
	require.NoError(t, err)
	require.NoError(t, bs[0].DeadLetter("bad input"))
	for i := range 7 {
		require.NoError(t, sq.Publish(ctx, int64(100+i), fmt.Sprint("f", i), []byte(pad)))
	}
	ds, err := sq.DeadValues(0, 0)
	require.NoError(t, err)
	name := fmt.Sprintf("%d@%d", ds[0].Seq, ds[0].PublishedAt.UnixNano())
	require.NoError(t, sq.Close())
	segs := segments(t, dir)
	require.Greater(t, len(segs), 1, "the value's segment is sealed")
	b, err := os.ReadFile(segs[0])
	require.NoError(t, err)
	i := bytes.Index(b, []byte("BROKEN|"))
	require.GreaterOrEqual(t, i, 0)
	b[i] ^= 0x20
	require.NoError(t, os.WriteFile(segs[0], b, 0o600))

	r := mustWalq(t, 2, "", "dlq", "requeue", dir, name)
	require.Contains(t, r.stderr, "dead value 1 ")
	require.Empty(t, r.stdout)
	r = mustWalq(t, 2, "", "dlq", "requeue", "--all", dir)
	require.Equal(t, "requeued 0 dead values\n", r.stdout)
	require.Contains(t, r.stderr, "dead value 1 ")
	require.Equal(t, "purged "+name+"\n", mustWalq(t, 0, "", "dlq", "purge", dir, name).stdout)
	require.Equal(t, "ID  SEQ  KEY  SORT  DELIVERIES  PUBLISHED  BYTES  REASON\n", mustWalq(t, 0, "", "dlq", "list", dir).stdout)
}
