package queue_test

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/internal/testhook"
	"github.com/walq/walq/queue"
)

// TestDeadLettersBesidePurgeAndCompact: a letter purged while DeadLetters
// reads the letters' payloads, and compacted out of the log, is gone: the
// listing leaves it out, as if purged before the call, and lists the
// others whole; it does not fail.
func TestDeadLettersBesidePurgeAndCompact(t *testing.T) {
	fsys := &gateFS{}
	q := deadLettersOutOfCache(t, fsys)
	defer q.Close()
	var dls []queue.DeadLetter
	_, err := whileReadHeld(t, fsys, func() (int, error) {
		var err error
		dls, err = q.DeadLetters(0, 0)
		return len(dls), err
	}, func() {
		require.NoError(t, q.PurgeDead("d1"))
		require.NoError(t, q.Compact())
	})
	require.NoError(t, err)
	require.Len(t, dls, 2)
	for i, id := range []string{"d0", "d2"} {
		require.Equal(t, id, dls[i].ID)
		want := fmt.Sprint("dead", id[1:], "|", string(bytes.Repeat([]byte("d"), 1500)))
		require.Equal(t, want, string(dls[i].Payload), id)
	}
}

// TestDeadValuesBesidePurgeAndCompact: the same for a sorted queue's
// DeadValues.
func TestDeadValuesBesidePurgeAndCompact(t *testing.T) {
	fsys := &gateFS{}
	s, dead := deadValuesOutOfCache(t, fsys)
	defer s.Close()
	var dvs []queue.DeadValue[int64]
	_, err := whileReadHeld(t, fsys, func() (int, error) {
		var err error
		dvs, err = s.DeadValues(0, 0)
		return len(dvs), err
	}, func() {
		require.NoError(t, s.PurgeDead(dead[1].Seq))
		require.NoError(t, s.Compact())
	})
	require.NoError(t, err)
	require.Len(t, dvs, 2)
	for i, d := range []queue.DeadValue[int64]{dead[0], dead[2]} {
		require.Equal(t, d.Seq, dvs[i].Seq)
		require.Equal(t, d.Payload, dvs[i].Payload)
	}
}

// TestBrowseBesideCopyForward: a never-delivered message that a
// compaction copies forward, out of the cursor's region, and cuts the log
// behind, while Browse reads the never-delivered messages from the log,
// is still listed, once; Browse does not fail.
func TestBrowseBesideCopyForward(t *testing.T) {
	fsys := &gateFS{}
	clk := newFakeClock()
	o := queue.Options{Sync: queue.SyncAlways, SegmentSize: 4096, FS: fsys, Clock: clk}
	testhook.SetManualCompaction(&o)
	q := open(t, t.TempDir(), &o)
	defer q.Close()
	enqueue(t, q, "backlog|"+string(bytes.Repeat([]byte("k"), 1500)), queue.WithID("k"))
	for range 12 { // delayed messages, delivered before it and acked
		enqueue(t, q, string(bytes.Repeat([]byte("b"), 3000)), queue.WithDelay(time.Second))
		clk.Advance(time.Second)
		m := tryDequeue(t, q)
		require.NotEqual(t, "k", m.ID)
		require.NoError(t, m.Ack())
	}
	var ready []queue.MessageInfo
	_, err := whileReadHeld(t, fsys, func() (int, error) {
		var err error
		ready, err = q.Browse(queue.StateReady, 0, 10)
		return len(ready), err
	}, func() {
		require.NoError(t, q.Compact())
		require.NotZero(t, q.Stats().Moved)
	})
	require.NoError(t, err)
	require.Len(t, ready, 1)
	require.Equal(t, "k", ready[0].ID)
}
