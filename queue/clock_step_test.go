package queue

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/internal/fakeclock"
)

// steppedClock is a Clock whose time can step without its timers moving,
// as the system's wall clock steps (set by hand, by NTP, a resume from
// suspend) while timers run on the monotonic clock: Advance moves both,
// Step moves Now only. armed receives each After's duration.
type steppedClock struct {
	mono  *fakeclock.Clock // the timers' time
	armed chan time.Duration
	mu    sync.Mutex
	step  time.Duration // how far Now is ahead of mono
}

func newSteppedClock() *steppedClock {
	return &steppedClock{mono: fakeclock.New(), armed: make(chan time.Duration, 1024)}
}

func (c *steppedClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mono.Now().Add(c.step)
}

func (c *steppedClock) After(d time.Duration) <-chan time.Time {
	ch := c.mono.After(d)
	c.armed <- d
	return ch
}

func (c *steppedClock) Step(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.step += d
}

// A blocked call, or the lease housekeeper, that sleeps until a due time
// by the queue's clock wakes at most clockRecheck after a forward step of
// that clock makes it due, not when the timer set before the step ends
// (up to a window, delay or AckTimeout late). The step comes once the
// re-check's timer (clockRecheck) is set.
func TestForwardClockStepWakesSleepers(t *testing.T) {
	const span = time.Hour // the window, delay and AckTimeout
	ctx := context.Background()
	for _, tt := range []struct {
		name  string
		start func(t *testing.T, clk *steppedClock) func() (string, error) // returns the blocking call
	}{
		{"windowed Pull", func(t *testing.T, clk *steppedClock) func() (string, error) {
			o := &WindowOptions{Window: span}
			o.Clock, o.ManualRequeue = clk, true
			w, err := OpenWindowed(t.TempDir(), o)
			require.NoError(t, err)
			t.Cleanup(func() { w.Close() })
			require.NoError(t, w.Publish(ctx, "k", []byte("v")))
			return func() (string, error) {
				bs, err := w.Pull(ctx, 10)
				if err != nil {
					return "", err
				}
				return string(bs[0].Values[0].Payload), bs[0].Ack()
			}
		}},
		{"Dequeue of a delayed message", func(t *testing.T, clk *steppedClock) func() (string, error) {
			q, err := Open(t.TempDir(), &Options{Clock: clk, ManualRequeue: true})
			require.NoError(t, err)
			t.Cleanup(func() { q.Close() })
			_, err = q.Enqueue(ctx, []byte("v"), WithDelay(span))
			require.NoError(t, err)
			return func() (string, error) {
				m, err := q.Dequeue(ctx)
				if err != nil {
					return "", err
				}
				return string(m.Payload), m.Ack()
			}
		}},
		{"lease housekeeper", func(t *testing.T, clk *steppedClock) func() (string, error) {
			q, err := Open(t.TempDir(), &Options{Clock: clk, AckTimeout: span})
			require.NoError(t, err)
			t.Cleanup(func() { q.Close() })
			_, err = q.Enqueue(ctx, []byte("v"))
			require.NoError(t, err)
			_, err = q.TryDequeue() // the lease the housekeeper must end
			require.NoError(t, err)
			return func() (string, error) { // sets no timer: woken by the requeue alone
				m, err := q.Dequeue(ctx)
				if err != nil {
					return "", err
				}
				return string(m.Payload), m.Ack()
			}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clk := newSteppedClock()
			call := tt.start(t, clk)
			type result struct {
				payload string
				err     error
			}
			done := make(chan result, 1)
			go func() {
				p, err := call()
				done <- result{p, err}
			}()
			for d := range clk.armed { // the re-check's timer, set before the step
				if d == clockRecheck {
					break
				}
			}
			clk.Step(span)
			clk.mono.Advance(clockRecheck)
			select {
			case r := <-done:
				require.NoError(t, r.err)
				require.Equal(t, "v", r.payload)
			case <-time.After(5 * time.Second):
				t.Fatalf("still asleep after the clock stepped past the due time and clockRecheck passed")
			}
		})
	}
}

// Blocked Dequeues waiting for a message delayed by an hour sleep until it
// is due: while the clock only runs, the queue's re-checks of the clock
// wake none of them, however many pass.
func TestClockRecheckLeavesSleepersAsleep(t *testing.T) {
	const sleepers = 50
	clk := &countingClock{Clock: fakeclock.New()}
	q, err := Open(t.TempDir(), &Options{Clock: clk, ManualRequeue: true})
	require.NoError(t, err)
	defer q.Close()
	var looks atomic.Int64 // each look of a blocked Dequeue that found nothing
	q.foundNothing = func() { looks.Add(1) }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err = q.Enqueue(ctx, []byte("v"), WithDelay(time.Hour))
	require.NoError(t, err)
	var wg sync.WaitGroup
	for range sleepers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := q.Dequeue(ctx)
			require.ErrorIs(t, err, context.Canceled)
		}()
	}
	// Every sleeper asleep (two looks each) and the re-check's timer set.
	waitFor(t, func() bool {
		return looks.Load() == 2*sleepers && clk.timers.Load() >= sleepers && clk.recheck.Load()
	})
	for range 3 {
		timers, asleep := clk.timers.Load(), looks.Load()
		clk.Advance(clockRecheck)
		waitFor(t, func() bool { return clk.timers.Load() > timers }) // a timer set again after the re-check
		require.Equal(t, asleep, looks.Load(), "a re-check of the clock woke sleepers whose time has not come")
	}
	cancel()
	wg.Wait()
}

// countingClock is a fake clock that counts the timers set and notes
// whether one was set for clockRecheck.
type countingClock struct {
	*fakeclock.Clock
	timers  atomic.Int64
	recheck atomic.Bool
}

func (c *countingClock) After(d time.Duration) <-chan time.Time {
	if d == clockRecheck {
		c.recheck.Store(true)
	}
	ch := c.Clock.After(d)
	c.timers.Add(1)
	return ch
}

// waitFor waits until cond holds, failing t after 5 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("the condition never held")
		}
		time.Sleep(time.Millisecond)
	}
}
