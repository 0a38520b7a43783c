package queue

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestReadOvertakenByClose: a call that reads the log outside the queue's
// lock, and whose read a Close overtakes (the log closed between the copy
// of the state and the read), returns ErrClosed or what it read, never the
// closed log's error as if the log had failed.
func TestReadOvertakenByClose(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name string
		call func(q *Queue) error
	}{
		{"Browse", func(q *Queue) error { _, err := q.Browse(StateReady, 0, 10); return err }},
		{"Peek", func(q *Queue) error { _, err := q.Peek(2); return err }},
		{"DeadLetters", func(q *Queue) error { _, err := q.DeadLetters(0, 0); return err }},
		{"TryDequeue", func(q *Queue) error { _, err := q.TryDequeue(); return err }},
		{"Stats", func(q *Queue) error { return q.Stats().CountsErr }},
	} {
		t.Run(c.name, func(t *testing.T) {
			q, err := Open(t.TempDir(), &Options{AckTimeout: time.Hour, manualCompact: true})
			require.NoError(t, err)
			id, err := q.Enqueue(ctx, []byte("dead"))
			require.NoError(t, err)
			m, err := q.TryDequeue()
			require.NoError(t, err)
			require.Equal(t, id, m.ID)
			require.NoError(t, m.DeadLetter("for DeadLetters to read"))
			_, err = q.Enqueue(ctx, []byte("never delivered"))
			require.NoError(t, err)
			var once sync.Once
			closeNow := func() { once.Do(func() { require.NoError(t, q.Close()) }) }
			t.Cleanup(closeNow) // when the call read nothing from the log
			q.reading, q.peeking, q.counted = closeNow, closeNow, closeNow
			if err := c.call(q); err != nil && !errors.Is(err, ErrClosed) {
				t.Fatalf("%s overtaken by Close: %v", c.name, err)
			}
		})
	}
}
