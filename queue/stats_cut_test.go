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

// TestStatsOldestBesideCut: a compaction that copies the never-delivered
// messages forward and cuts the log behind them after Stats copied the
// counts, and before it read the oldest one's time from the log, leaves
// OldestEnqueuedAt set, and OldestErr nil: the oldest message is still
// pending, in the index now. So do more cuts in a row, each with a fresh
// message enqueued after it, so that each count again reads the log again.
func TestStatsOldestBesideCut(t *testing.T) {
	for _, cuts := range []int{1, overtakes} {
		t.Run(fmt.Sprint(cuts, " cuts"), func(t *testing.T) {
			q, ot := openOvertaken(t)
			q.reading = nil
			q.counted = ot.hook
			enq := q.opts.Clock.Now()
			enqueueLive(t, q, "k")
			fresh := 0
			ot.after = func() {
				_, err := q.Enqueue(context.Background(), []byte("fresh"), WithID(fmt.Sprint("p", fresh)))
				require.NoError(t, err)
				fresh++
			}
			ot.left = cuts
			s := q.Stats()
			require.Equal(t, cuts, ot.ran)
			require.NoError(t, s.OldestErr, "a cut is no read failure")
			require.NotZero(t, s.Ready)
			require.False(t, s.OldestEnqueuedAt.IsZero(), "no OldestEnqueuedAt with %d messages ready", s.Ready)
			require.Equal(t, enq.UnixNano(), s.OldestEnqueuedAt.UnixNano())
		})
	}
}

// TestStatsOldestWhileCompacting: Stats called over and over while
// compactions copy the never-delivered messages forward and cut the log
// says when the oldest message was enqueued whenever it counts one, and
// never reports a cut, or a record still being written, as OldestErr.
func TestStatsOldestWhileCompacting(t *testing.T) {
	const rounds = 40
	clk := fakeclock.New()
	o := Options{Sync: SyncAlways, SegmentSize: 4096, Clock: clk, manualCompact: true}
	q, err := Open(t.TempDir(), &o)
	require.NoError(t, err)
	defer q.Close()
	ctx := context.Background()
	done := make(chan error, 1)
	go func() {
		done <- func() error {
			for i := range rounds {
				// A fresh never-delivered message, then acked ones behind
				// it: the compaction copies it forward and cuts the log.
				if _, err := q.Enqueue(ctx, []byte("backlog"), WithID(fmt.Sprint("k", i))); err != nil {
					return err
				}
				for range 6 {
					if _, err := q.Enqueue(ctx, bytes.Repeat([]byte("b"), 3000), WithDelay(time.Second)); err != nil {
						return err
					}
					clk.Advance(time.Second)
					m, err := q.TryDequeue()
					if err != nil {
						return err
					}
					if err := m.Ack(); err != nil {
						return err
					}
				}
				if err := q.Compact(); err != nil {
					return err
				}
			}
			return nil
		}()
	}()
	calls := 0
	for {
		select {
		case err := <-done:
			require.NoError(t, err)
			require.NotZero(t, q.Stats().Moved)
			t.Logf("%d Stats calls", calls)
			return
		default:
		}
		written, last := q.log.WrittenLSN(), q.log.LastLSN()
		s := q.Stats()
		calls++
		require.NoError(t, s.OldestErr, "call %d: a cut or a record being written is no read failure", calls)
		if written < last || q.log.LastLSN() != last {
			continue // a record counted but not yet written: see Stats.OldestEnqueuedAt
		}
		if s.Ready+s.Delayed+s.InFlight > 0 {
			require.False(t, s.OldestEnqueuedAt.IsZero(), "call %d: no OldestEnqueuedAt with %d ready, %d delayed, %d in flight",
				calls, s.Ready, s.Delayed, s.InFlight)
		}
	}
}
