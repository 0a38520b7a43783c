package queue

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// Flush reports an outcome it knows whatever its context says, as
// Pending.Wait does: when every call it waits for has completed, an
// ended context does not turn their success into the context's error.
// The seam, run once Flush took the calls it waits for, lets them
// complete and then ends the context, so both are known when Flush waits.
func TestFlushKnownOutcomeWins(t *testing.T) {
	q, err := Open(t.TempDir(), &Options{ManualRequeue: true})
	require.NoError(t, err)
	defer q.Close()
	var end context.CancelFunc // ends the round's context
	waited := 0
	q.flushing = func(fs []flight) {
		for _, f := range fs {
			<-f.c.Done()
		}
		if len(fs) > 0 {
			waited++
		}
		end()
	}
	for round := range 100 {
		ctx, cancel := context.WithCancel(context.Background())
		end = cancel
		_, err := q.EnqueueAsync(ctx, []byte("m"))
		require.NoError(t, err)
		err = q.Flush(ctx)
		cancel()
		require.NoError(t, err, "round %d: the calls had all completed", round)
	}
	require.NotZero(t, waited, "Flush never had a call in flight to wait for")
}
