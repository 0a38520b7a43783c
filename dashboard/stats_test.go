package dashboard_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/dashboard"
	"github.com/walq/walq/internal/fakeclock"
	"github.com/walq/walq/queue"
)

// statsOf reads api/stats of src; it returns the answer's status and
// figures, or its error text.
func statsOf(t *testing.T, src dashboard.Source) (int, dashboard.Stats, string) {
	t.Helper()
	s := server(t, src, nil)
	var reply struct {
		Stats dashboard.Stats `json:"stats"`
		Error string          `json:"error"`
	}
	code := getJSON(t, s.URL+"/queue/api/stats", &reply)
	return code, reply.Stats, reply.Error
}

// The oldest message's age is read by the queue's clock, which a service
// may set (Options.Clock), not by the system's.
func TestOldestAgeByQueueClock(t *testing.T) {
	clock := fakeclock.New()
	o := queue.Options{Clock: clock, ManualRequeue: true}
	q, err := queue.Open(t.TempDir(), &o)
	require.NoError(t, err)
	defer q.Close()
	_, err = q.Enqueue(context.Background(), []byte("m"))
	require.NoError(t, err)
	sq, err := queue.OpenSorted[int](t.TempDir(), &queue.SortedOptions{Options: o})
	require.NoError(t, err)
	defer sq.Close()
	require.NoError(t, sq.Publish(context.Background(), 1, "k", []byte("v")))
	clock.Advance(time.Hour)
	for name, src := range map[string]dashboard.Source{"ForQueue": dashboard.ForQueue(q),
		"ForAckQueue": dashboard.ForAckQueue(q), "ForSorted": dashboard.ForSorted(sq)} {
		t.Run(name, func(t *testing.T) {
			code, st, msg := statsOf(t, src)
			require.Equal(t, 200, code, msg)
			assert.Equal(t, time.Hour.Seconds(), st.OldestAgeSeconds)
		})
	}
}

// A closed queue's figures are not answered as if they were its
// contents: api/stats fails, saying why.
func TestStatsOfClosedQueue(t *testing.T) {
	q, err := queue.Open(t.TempDir(), nil)
	require.NoError(t, err)
	_, err = q.Enqueue(context.Background(), []byte("m"))
	require.NoError(t, err)
	require.NoError(t, q.Close())
	sq, err := queue.OpenSorted[int](t.TempDir(), nil)
	require.NoError(t, err)
	require.NoError(t, sq.Close())
	for name, src := range map[string]dashboard.Source{"ForQueue": dashboard.ForQueue(q),
		"ForAckQueue": dashboard.ForAckQueue(q), "ForSorted": dashboard.ForSorted(sq)} {
		t.Run(name, func(t *testing.T) {
			code, st, msg := statsOf(t, src)
			assert.Equal(t, 500, code, "figures %+v", st)
			assert.Contains(t, msg, queue.ErrClosed.Error())
		})
	}
}

// failingEngine is an engine whose figures cannot be read, as a Redis
// queue's while its server is down: Stats returns zeros, StatsContext
// the error.
type failingEngine struct{ *queue.Queue }

var errEngineDown = errors.New("engine down")

func (failingEngine) Stats() queue.Stats { return queue.Stats{} }
func (failingEngine) StatsContext(context.Context) (queue.Stats, error) {
	return queue.Stats{}, errEngineDown
}

// ForAckQueue reads the figures with their error when the engine gives
// one (StatsContext): zeros from an engine that failed are not figures.
func TestStatsOfFailingEngine(t *testing.T) {
	code, st, msg := statsOf(t, dashboard.ForAckQueue(failingEngine{openQueue(t)}))
	assert.Equal(t, 500, code, "figures %+v", st)
	assert.Contains(t, msg, errEngineDown.Error())
}

// Run reports a failure to read the figures through Options.Logger, and
// samples nothing for it.
func TestRunReportsStatsError(t *testing.T) {
	var logged bytes.Buffer
	h := dashboard.New(dashboard.ForAckQueue(failingEngine{openQueue(t)}),
		&dashboard.Options{Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // Run samples once, then returns
	require.ErrorIs(t, h.Run(ctx, time.Second), context.Canceled)
	assert.Contains(t, logged.String(), errEngineDown.Error())
	assert.Contains(t, logged.String(), "level=ERROR")
}
