package queue

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/internal/fakeclock"
)

// overtakes is how many compactions overtake one read in the tests below:
// more than any fixed number of retries a reader could have.
const overtakes = 6

// liveBody is the payload of the message or value a test reads.
var liveBody = []byte("live|" + string(bytes.Repeat([]byte("k"), 1500)))

// overtaker is a reading hook that, the first left times it is called,
// writes enough settled records to put the log over its bound and
// compacts: the compaction copies every live message forward and cuts
// the log behind the copies, so the read that follows the hook finds the
// record it was about to read gone.
type overtaker struct {
	t     *testing.T
	q     *Queue
	churn func() // writes about four segments of records, all settled
	after func() // called after each compaction; nil: nothing
	left  int    // compactions still to run
	ran   int    // compactions run
	busy  bool   // a compaction is running: a call from within it does nothing
}

func (o *overtaker) hook() {
	if o.left == 0 || o.busy {
		return
	}
	o.busy = true
	defer func() { o.busy = false }()
	o.left--
	o.churn()
	before := o.q.Stats()
	require.NoError(o.t, o.q.Compact())
	after := o.q.Stats()
	require.Greater(o.t, after.Moved, before.Moved, "compaction %d copied nothing forward", o.ran+1)
	require.Greater(o.t, after.Segments[0].FirstLSN, before.Segments[0].FirstLSN, "compaction %d cut nothing", o.ran+1)
	o.ran++
	if o.after != nil {
		o.after()
	}
}

// openOvertaken opens an ack queue whose reads the returned overtaker
// overtakes once its left is set.
func openOvertaken(t *testing.T) (*Queue, *overtaker) {
	t.Helper()
	clk := fakeclock.New()
	o := Options{Sync: SyncAlways, SegmentSize: 4096, Clock: clk, AckTimeout: time.Hour, manualCompact: true}
	q, err := Open(t.TempDir(), &o)
	require.NoError(t, err)
	t.Cleanup(func() { q.Close() })
	ot := &overtaker{t: t, q: q, churn: func() {
		for range 6 { // delayed messages, delivered before any other and acked
			_, err := q.Enqueue(context.Background(), bytes.Repeat([]byte("b"), 3000), WithDelay(time.Second))
			require.NoError(t, err)
			clk.Advance(time.Second)
			m, err := q.TryDequeue()
			require.NoError(t, err)
			require.Equal(t, "b", string(m.Payload[:1]), "the churn took another message")
			require.NoError(t, m.Ack())
		}
	}}
	q.reading = ot.hook
	return q, ot
}

// enqueueLive enqueues liveBody as id and returns its seq.
func enqueueLive(t *testing.T, q *Queue, id string) uint64 {
	t.Helper()
	_, err := q.Enqueue(context.Background(), liveBody, WithID(id))
	require.NoError(t, err)
	info, err := q.Browse(StateReady, 0, 10)
	require.NoError(t, err)
	for _, m := range info {
		if m.ID == id {
			return m.Seq
		}
	}
	t.Fatalf("%s not ready", id)
	return 0
}

// deadLive enqueues liveBody as id and dead-letters it.
func deadLive(t *testing.T, q *Queue, id string) uint64 {
	t.Helper()
	seq := enqueueLive(t, q, id)
	m, err := q.TryDequeue()
	require.NoError(t, err)
	require.Equal(t, id, m.ID)
	require.NoError(t, m.DeadLetter("pin"))
	return seq
}

// TestReadFollowsEveryCopy: a read of a live message that compactions copy
// forward again and again while it reads, each cutting the log behind the
// copy it made before the read reaches it, follows every copy and returns
// the message whole: never ErrNotFound, never a log error.
func TestReadFollowsEveryCopy(t *testing.T) {
	for _, tc := range []struct {
		name string
		read func(t *testing.T, q *Queue, ot *overtaker)
	}{
		{"Peek dead", func(t *testing.T, q *Queue, ot *overtaker) {
			seq := deadLive(t, q, "k")
			ot.left = overtakes
			info, err := q.Peek(seq)
			require.NoError(t, err)
			require.Equal(t, liveBody, info.Payload)
		}},
		{"Peek never delivered", func(t *testing.T, q *Queue, ot *overtaker) {
			seq := enqueueLive(t, q, "k")
			ot.left = overtakes
			info, err := q.Peek(seq)
			require.NoError(t, err)
			require.Equal(t, liveBody, info.Payload)
		}},
		{"DeadLetters", func(t *testing.T, q *Queue, ot *overtaker) {
			deadLive(t, q, "k")
			ot.left = overtakes
			dls, err := q.DeadLetters(0, 0)
			require.NoError(t, err)
			require.Len(t, dls, 1)
			require.Equal(t, liveBody, dls[0].Payload)
		}},
		{"RequeueDead", func(t *testing.T, q *Queue, ot *overtaker) {
			deadLive(t, q, "k")
			ot.left = overtakes
			require.NoError(t, q.RequeueDead("k"))
			m, err := q.TryDequeue()
			require.NoError(t, err)
			require.Equal(t, liveBody, m.Payload)
		}},
		{"Dequeue", func(t *testing.T, q *Queue, ot *overtaker) {
			enqueueLive(t, q, "k")
			m, err := q.TryDequeue()
			require.NoError(t, err)
			require.NoError(t, m.Nack(0)) // ready again: an indexed message
			ot.left = overtakes
			m, err = q.Dequeue(context.Background())
			require.NoError(t, err)
			require.Equal(t, "k", m.ID)
			require.Equal(t, liveBody, m.Payload)
		}},
		{"Browse", func(t *testing.T, q *Queue, ot *overtaker) {
			enqueueLive(t, q, "k")
			// A fresh never-delivered message after each compaction, so
			// that each try of Browse reads the log again, and is cut.
			fresh := 0
			ot.after = func() {
				_, err := q.Enqueue(context.Background(), []byte("fresh"), WithID(fmt.Sprint("p", fresh)))
				require.NoError(t, err)
				fresh++
			}
			ot.left = overtakes
			ready, err := q.Browse(StateReady, 0, 100)
			require.NoError(t, err)
			ids := []string{"k"}
			for i := range fresh {
				ids = append(ids, fmt.Sprint("p", i))
			}
			var got []string
			for _, m := range ready {
				got = append(got, m.ID)
			}
			require.Equal(t, ids, got)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, ot := openOvertaken(t)
			tc.read(t, q, ot)
			require.Equal(t, overtakes, ot.ran, "the read was not overtaken as often as planned")
		})
	}
}

// openOvertakenSorted is openOvertaken for a sorted queue with no payload
// cache (every read of a value goes to the log) and MaxDeliveries 1.
func openOvertakenSorted(t *testing.T) (*Sorted[int64], *overtaker) {
	t.Helper()
	o := SortedOptions{Options: Options{Sync: SyncAlways, SegmentSize: 4096, MaxDeliveries: 1, manualCompact: true},
		CacheBytes: -1}
	s, err := OpenSorted[int64](t.TempDir(), &o)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	ot := &overtaker{t: t, q: s.q, churn: func() {
		for i := range 6 {
			require.NoError(t, s.Publish(context.Background(), int64(1000+i), "busy", bytes.Repeat([]byte("b"), 3000)))
			bs, err := s.TryPull(1)
			require.NoError(t, err)
			require.Len(t, bs, 1)
			require.Equal(t, "busy", bs[0].Key, "the churn took another key")
			require.NoError(t, bs[0].Ack())
		}
	}}
	s.q.reading = ot.hook
	return s, ot
}

// deadLiveValue publishes liveBody under key and dead-letters it.
func deadLiveValue(t *testing.T, s *Sorted[int64], key string) DeadValue[int64] {
	t.Helper()
	require.NoError(t, s.Publish(context.Background(), 0, key, liveBody))
	bs, err := s.TryPull(1)
	require.NoError(t, err)
	require.NoError(t, bs[0].Nack(0)) // its first and last delivery
	ds, err := s.DeadValues(0, 0)
	require.NoError(t, err)
	require.Len(t, ds, 1)
	return ds[0]
}

// TestSortedReadFollowsEveryCopy is TestReadFollowsEveryCopy for a sorted
// queue's values.
func TestSortedReadFollowsEveryCopy(t *testing.T) {
	for _, tc := range []struct {
		name string
		read func(t *testing.T, s *Sorted[int64], ot *overtaker)
	}{
		{"DeadValues", func(t *testing.T, s *Sorted[int64], ot *overtaker) {
			deadLiveValue(t, s, "k")
			ot.left = overtakes
			ds, err := s.DeadValues(0, 0)
			require.NoError(t, err)
			require.Len(t, ds, 1)
			require.Equal(t, liveBody, ds[0].Payload)
		}},
		{"RequeueDeadValue", func(t *testing.T, s *Sorted[int64], ot *overtaker) {
			d := deadLiveValue(t, s, "k")
			ot.left = overtakes
			require.NoError(t, s.RequeueDeadValue(d))
			require.Equal(t, 1, s.Stats().SortedPending)
		}},
		{"Pull", func(t *testing.T, s *Sorted[int64], ot *overtaker) {
			require.NoError(t, s.Publish(context.Background(), 0, "k", liveBody))
			ot.left = overtakes
			bs, err := s.TryPull(1)
			require.NoError(t, err)
			require.Len(t, bs, 1)
			require.Equal(t, "k", bs[0].Key)
			require.Equal(t, liveBody, bs[0].Values[0].Payload)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, ot := openOvertakenSorted(t)
			tc.read(t, s, ot)
			require.Equal(t, overtakes, ot.ran, "the read was not overtaken as often as planned")
		})
	}
}
