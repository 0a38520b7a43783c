package queue

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/index"
	"github.com/walq/walq/internal/fakeclock"
)

// An index entry that names another message's record (every checksum
// fine): Verify reports it, Repair drops the message and says so, and then
// a compaction succeeds and every other message is delivered once.
func TestRepairDropsMisplacedEntry(t *testing.T) {
	dir := t.TempDir()
	clock := fakeclock.New()
	o := &Options{SegmentSize: 4096, Clock: clock, manualCompact: true}
	q, err := Open(dir, o)
	require.NoError(t, err)
	ctx := context.Background()
	for _, p := range []string{"payload of A", "payload of B"} {
		_, err := q.Enqueue(ctx, []byte(p), WithDelay(time.Hour), WithID(p[len(p)-1:]))
		require.NoError(t, err)
	}
	a, b := misplaceFirst(q)
	churn := func(q *Queue) {
		for range 100 {
			_, err := q.Enqueue(ctx, []byte(strings.Repeat("g", 300)))
			require.NoError(t, err)
			m, err := q.TryDequeue()
			require.NoError(t, err)
			require.NoError(t, m.Ack())
		}
	}
	churn(q)
	_, err = q.Enqueue(ctx, []byte("payload of C"), WithID("C"))
	require.NoError(t, err)
	err = q.Compact()
	require.ErrorIs(t, err, ErrCorrupt)
	require.ErrorContains(t, err, fmt.Sprintf("is the enqueue record of message %d, not the payload of message %d", b.Seq, a.Seq))
	require.NoError(t, q.Close())

	c, err := Verify(dir, nil)
	require.ErrorIs(t, err, ErrCorrupt)
	require.False(t, c.Clean(), "Verify must report an entry that names another message's record")
	rep, err := Repair(dir, nil)
	require.NoError(t, err)
	require.True(t, rep.Repaired)
	require.Equal(t, []Lost{{Seq: a.Seq, ID: "A"}}, rep.Recovery.Dropped)
	require.True(t, rep.After.Clean())

	q, err = Open(dir, o)
	require.NoError(t, err)
	defer q.Close()
	got := map[string]int{}
	drain := func() {
		for {
			m, err := q.TryDequeue()
			if errors.Is(err, ErrEmpty) {
				return
			}
			require.NoError(t, err)
			got[string(m.Payload)]++
			require.NoError(t, m.Ack())
		}
	}
	drain()
	churn(q)
	require.NoError(t, q.Compact())
	clock.Advance(2 * time.Hour)
	drain()
	require.Equal(t, map[string]int{"payload of B": 1, "payload of C": 1}, got)
}

// misplaceFirst points the index entry of q's first message at the record
// of its second, as a damaged snapshot whose checksum is fine would, and
// returns the two entries (the first as changed).
func misplaceFirst(q *Queue) (a, b index.Entry) {
	q.mu.Lock()
	defer q.mu.Unlock()
	var es []index.Entry
	q.mu.st.table.Ascend(func(e index.Entry) bool { es = append(es, e); return true })
	a, b = es[0], es[1]
	a.Loc = b.Loc
	q.mu.st.table.Put(a)
	return a, b
}
