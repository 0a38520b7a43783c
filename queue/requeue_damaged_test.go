package queue_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/internal/testhook"
	"github.com/walq/walq/queue"
)

// damagedDead returns a queue with two dead letters: "broken", whose
// payload lies in a damaged segment, and "healthy".
func damagedDead(t *testing.T) *queue.Queue {
	t.Helper()
	q, _, broken, flip := damagedReady(t)
	enqueue(t, q, "HEALTHY", queue.WithID("healthy"))
	flip()
	_, err := q.Dequeue(context.Background())
	var re *queue.ReadError
	require.True(t, errors.As(err, &re), "%v", err)
	require.Equal(t, broken, re.ID)
	require.NoError(t, q.DeadLetter(re.Delivery, "unreadable"))
	require.NoError(t, tryDequeue(t, q).DeadLetter("bad input"))
	require.EqualValues(t, 2, q.Stats().Dead)
	return q
}

// A dead letter whose payload cannot be read was requeued like any
// other, to fail again at each delivery (and, with MaxDeliveries < 0,
// for ever). Requeueing it is refused now, with the damage named;
// RequeueAllDead requeues the others and reports it; purging it works.
func TestRequeueDamagedDeadLetter(t *testing.T) {
	t.Run("one", func(t *testing.T) {
		q := damagedDead(t)
		err := q.RequeueDead("broken")
		require.ErrorIs(t, err, queue.ErrCorrupt)
		require.ErrorContains(t, err, `dead letter "broken"`)
		require.ErrorContains(t, err, "purge")
		require.EqualValues(t, 2, q.Stats().Dead, "nothing requeued")
		require.NoError(t, q.RequeueDead("healthy"))
		m := tryDequeue(t, q)
		require.Equal(t, "healthy", m.ID)
		require.Equal(t, "HEALTHY", string(m.Payload))
		requireEmpty(t, q)
		require.NoError(t, q.PurgeDead("broken"))
		require.Zero(t, q.Stats().Dead)
	})
	t.Run("all", func(t *testing.T) {
		q := damagedDead(t)
		n, err := q.RequeueAllDead()
		require.ErrorIs(t, err, queue.ErrCorrupt)
		require.ErrorContains(t, err, `dead letter "broken"`)
		require.Equal(t, 1, n, "the readable letter is requeued")
		st := q.Stats()
		require.EqualValues(t, 1, st.Dead)
		require.EqualValues(t, 1, st.Ready)
		m := tryDequeue(t, q)
		require.Equal(t, "healthy", m.ID)
		requireEmpty(t, q)
		dead, err := q.DeadLetters(0, 0)
		require.NoError(t, err)
		require.Len(t, dead, 1)
		require.Equal(t, "broken", dead[0].ID)
		n, err = q.PurgeAllDead()
		require.NoError(t, err)
		require.Equal(t, 1, n)
	})
}

// The same for a sorted queue's dead values: RequeueDead,
// RequeueDeadValue and RequeueAllDead refuse a damaged value.
func TestRequeueDamagedDeadValue(t *testing.T) {
	for _, name := range []string{"seq", "value", "all"} {
		t.Run(name, func(t *testing.T) {
			s := openDamagedSorted(t)
			bs, err := s.Pull(context.Background(), 100)
			res := queue.ReadErrors(err)
			require.NotEmpty(t, res, "%v", err)
			for _, re := range res {
				require.NoError(t, s.DeadLetter(re.Receipt, "unreadable"))
			}
			for _, b := range bs {
				require.NoError(t, s.DeadLetter(b.Receipt, "bad input"))
			}
			dead, err := s.DeadValues(0, 0)
			require.NoError(t, err)
			require.Equal(t, "broken", dead[0].Key)
			total := len(dead)

			switch name {
			case "seq":
				err = s.RequeueDead(dead[0].Seq)
			case "value":
				err = s.RequeueDeadValue(dead[0])
			case "all":
				var n int
				n, err = s.RequeueAllDead()
				require.Equal(t, len(bs), n, "the readable values are requeued")
			}
			require.ErrorIs(t, err, queue.ErrCorrupt)
			require.ErrorContains(t, err, "dead value 1 ")
			require.ErrorContains(t, err, "purge")
			left, err := s.DeadValues(0, 0)
			require.NoError(t, err)
			if name == "all" {
				require.Len(t, left, len(res), "only the damaged values stay dead")
			} else {
				require.Len(t, left, total, "nothing requeued")
			}
			for _, d := range left {
				if d.Key == "broken" {
					require.NoError(t, s.PurgeDeadValue(d), "purge keeps working")
				}
			}
		})
	}
}

// TestRequeueDeadAfterClose: RequeueDead on a closed queue read the
// letter from the closed log and called it unreadable, advising to purge
// a healthy letter. It says ErrClosed, as every other call does.
func TestRequeueDeadAfterClose(t *testing.T) {
	q := open(t, t.TempDir(), &queue.Options{})
	enqueue(t, q, "x", queue.WithID("d"))
	require.NoError(t, tryDequeue(t, q).DeadLetter("why"))
	require.NoError(t, q.Close())
	require.ErrorIs(t, q.RequeueDead("d"), queue.ErrClosed)
	_, err := q.RequeueAllDead()
	require.ErrorIs(t, err, queue.ErrClosed)
}

// errDisk is a read error that is not damage: a failing disk.
var errDisk = errors.New("disk read failed")

// TestRequeueDeadReadError: a read of a dead letter that fails for
// another reason than damage (an I/O error) is returned as itself,
// naming the letter, never as advice to purge it; the letter stays dead
// and a later requeue works.
func TestRequeueDeadReadError(t *testing.T) {
	fsys := &gateFS{}
	o := queue.Options{Sync: queue.SyncAlways, SegmentSize: 4096, FS: fsys}
	testhook.SetManualCompaction(&o)
	q := open(t, t.TempDir(), &o)
	defer q.Close()
	enqueue(t, q, "DEAD", queue.WithID("d"))
	require.NoError(t, tryDequeue(t, q).DeadLetter("why"))
	for range 6 { // push the letter out of the log's entry cache
		enqueue(t, q, string(bytes.Repeat([]byte("b"), 3000)))
		require.NoError(t, tryDequeue(t, q).Ack())
	}
	for _, all := range []bool{false, true} {
		fsys.failNextRead(errDisk)
		var err error
		if all {
			_, err = q.RequeueAllDead()
		} else {
			err = q.RequeueDead("d")
		}
		require.ErrorIs(t, err, errDisk)
		require.NotErrorIs(t, err, queue.ErrCorrupt)
		require.ErrorContains(t, err, `dead letter "d"`)
		require.NotContains(t, err.Error(), "purge")
		require.EqualValues(t, 1, q.Stats().Dead, "nothing requeued")
	}
	require.NoError(t, q.RequeueDead("d"))
	require.Equal(t, "DEAD", string(tryDequeue(t, q).Payload))
}

// TestSortedRequeueDeadReadError is TestRequeueDeadReadError for a
// sorted queue's dead value.
func TestSortedRequeueDeadReadError(t *testing.T) {
	fsys := &gateFS{}
	s := openUncachedSorted(t, fsys)
	defer s.Close()
	ctx := context.Background()
	require.NoError(t, s.Publish(ctx, 1, "dead", []byte("DEAD")))
	bs, err := s.TryPull(10)
	require.NoError(t, err)
	require.NoError(t, bs[0].DeadLetter("why"))
	dead, err := s.DeadValues(0, 0)
	require.NoError(t, err)
	require.Len(t, dead, 1)
	for i := range 6 { // push the value out of the log's entry cache
		require.NoError(t, s.Publish(ctx, 100, fmt.Sprint("busy", i), bytes.Repeat([]byte("b"), 3000)))
		bs, err := s.TryPull(10)
		require.NoError(t, err)
		require.NoError(t, bs[0].Ack())
	}
	for _, how := range []string{"seq", "value", "all"} {
		fsys.failNextRead(errDisk)
		switch how {
		case "seq":
			err = s.RequeueDead(dead[0].Seq)
		case "value":
			err = s.RequeueDeadValue(dead[0])
		case "all":
			_, err = s.RequeueAllDead()
		}
		require.ErrorIs(t, err, errDisk, how)
		require.NotErrorIs(t, err, queue.ErrCorrupt, how)
		require.ErrorContains(t, err, fmt.Sprintf("dead value %d ", dead[0].Seq), how)
		require.NotContains(t, err.Error(), "purge", how)
		require.Equal(t, 1, s.Stats().SortedDead, "nothing requeued")
	}
	require.NoError(t, s.RequeueDeadValue(dead[0]))
}

// TestRequeueAllDeadNamesDamageOnce: RequeueAllDead joined one error per
// damaged letter, each repeating the whole way out (walq repair, walq
// verify). It says the way out once, names the first letters and counts
// the rest.
func TestRequeueAllDeadNamesDamageOnce(t *testing.T) {
	o := queue.Options{SegmentSize: 4096}
	testhook.SetManualCompaction(&o)
	dir := t.TempDir()
	q := open(t, dir, &o)
	defer q.Close()
	const damaged = 12
	for i := range damaged {
		enqueue(t, q, fmt.Sprintf("BAD%02d", i), queue.WithID(fmt.Sprintf("b%02d", i)))
		require.NoError(t, tryDequeue(t, q).DeadLetter("why"))
	}
	for range 2 { // keep the healthy letter off the damaged entries
		enqueue(t, q, string(bytes.Repeat([]byte("f"), 3000)))
		require.NoError(t, tryDequeue(t, q).Ack())
	}
	enqueue(t, q, "HEALTHY", queue.WithID("healthy"))
	require.NoError(t, tryDequeue(t, q).DeadLetter("why"))
	for range 6 { // push the letters out of the log's entry cache
		enqueue(t, q, string(bytes.Repeat([]byte("f"), 3000)))
		require.NoError(t, tryDequeue(t, q).Ack())
	}
	for i := range damaged {
		corruptLog(t, dir, []byte(fmt.Sprintf("BAD%02d", i)))
	}
	n, err := q.RequeueAllDead()
	require.Equal(t, 1, n, "the healthy letter is requeued: %v", err)
	require.ErrorIs(t, err, queue.ErrCorrupt)
	require.Equal(t, 1, strings.Count(err.Error(), "walq repair"), "%v", err)
	require.ErrorContains(t, err, `"b00"`)
	require.ErrorContains(t, err, `"b09"`)
	require.NotContains(t, err.Error(), `"b10"`)
	require.ErrorContains(t, err, "and 2 more")
	require.EqualValues(t, damaged, q.Stats().Dead)
}

// corruptLog flips a bit of mark in the segment of dir's log that holds it.
func corruptLog(t *testing.T, dir string, mark []byte) {
	t.Helper()
	for _, seg := range segments(t, dir) {
		b, err := os.ReadFile(seg)
		require.NoError(t, err)
		if bytes.Contains(b, mark) {
			corruptSegment(t, seg, mark)
			return
		}
	}
	t.Fatalf("%q in no segment of %s", mark, dir)
}
