package redisq

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRideKeepsRefusalAtContextEnd: a call refused (TRYAGAIN) and sent
// again, whose context ends during a send after the first (the send
// returns the context's error alone, as go-redis does when the context
// ends while it waits for a connection), returns the context's error
// naming the refusal it rode, and does not pass for a refusal itself:
// that send may have run.
func TestRideKeepsRefusalAtContextEnd(t *testing.T) {
	h := &handle{closed: make(chan struct{}), o: Options{OpTimeout: time.Minute}}
	tryAgain := refusal("TRYAGAIN Multiple keys request during rehashing of slot")
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	sends := 0
	_, err := h.rideMoves(ctx, func(ctx context.Context) (any, error) {
		sends++
		if sends == 1 {
			return nil, tryAgain
		}
		<-ctx.Done()
		return nil, ctx.Err()
	})
	require.Equal(t, 2, sends)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorContains(t, err, "TRYAGAIN ", "the error names the refusal the call rode")
	require.False(t, refused(err), "the last send may have run: the error is no refusal")
	require.False(t, errors.Is(err, tryAgain))
}
