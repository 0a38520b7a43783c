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
// closed log's error as if the log had failed. TryDequeue reads outside
// the lock only a message that is ready again (nacked): one at the cursor
// it reads under the lock, where no Close overtakes it.
func TestReadOvertakenByClose(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name   string
		nacked bool // the message not dead is delivered and nacked first
		call   func(q *Queue) error
	}{
		{"Browse", false, func(q *Queue) error { _, err := q.Browse(StateReady, 0, 10); return err }},
		{"Peek", false, func(q *Queue) error { _, err := q.Peek(2); return err }},
		{"DeadLetters", false, func(q *Queue) error { _, err := q.DeadLetters(0, 0); return err }},
		{"TryDequeue", true, func(q *Queue) error { _, err := q.TryDequeue(); return err }},
		{"Stats", false, func(q *Queue) error { return q.Stats().CountsErr }},
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
			_, err = q.Enqueue(ctx, []byte("not dead"))
			require.NoError(t, err)
			if c.nacked {
				m, err := q.TryDequeue()
				require.NoError(t, err)
				require.NoError(t, m.Nack(0))
			}
			var once sync.Once
			overtaken := false
			closeNow := func() { once.Do(func() { overtaken = true; require.NoError(t, q.Close()) }) }
			t.Cleanup(closeNow) // when a failed require stopped the test first
			q.reading, q.peeking, q.counted = closeNow, closeNow, closeNow
			if err := c.call(q); err != nil && !errors.Is(err, ErrClosed) {
				t.Fatalf("%s overtaken by Close: %v", c.name, err)
			}
			require.True(t, overtaken, "%s read nothing outside the lock: no Close overtook it", c.name)
		})
	}
}
