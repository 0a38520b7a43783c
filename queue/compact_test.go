package queue

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A Compact called while the housekeeper's pass copies old messages
// forward returns only once the log is within the bound: it waits for that
// pass and does its own. The seam holds the housekeeper's copy until the
// Compact has begun, as a large copy would.
func TestCompactBesideAPassThatCopies(t *testing.T) {
	const seg = 4096
	q, err := Open(t.TempDir(), &Options{SegmentSize: seg})
	require.NoError(t, err)
	defer q.Close()
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	q.copying = func() { once.Do(func() { close(entered); <-release }) }
	ctx := context.Background()
	_, err = q.Enqueue(ctx, []byte("delayed"), WithDelay(time.Hour))
	require.NoError(t, err)
	for range 300 {
		_, err := q.Enqueue(ctx, make([]byte, 200))
		require.NoError(t, err)
		m, err := q.TryDequeue()
		require.NoError(t, err)
		require.NoError(t, m.Ack())
	}
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the housekeeper copied nothing forward")
	}
	done := make(chan error, 1)
	go func() { done <- q.Compact() }()
	time.Sleep(50 * time.Millisecond) // the Compact gets as far as it may
	close(release)
	require.NoError(t, <-done)
	st := q.Stats()
	require.LessOrEqual(t, st.LogBytes, 2*st.LiveBytes+2*seg+seg, "log bounded by live bytes when Compact returns")
}
