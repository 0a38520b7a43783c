package queue_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
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
