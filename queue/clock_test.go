package queue

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// within checks that the wall clock's reading r, taken between the
// time.Now readings before and after, lies between them, give or take
// the time between the two clock reads of the base's time.Now (a
// preempted virtual processor can stretch it).
func within(t *testing.T, before, r, after int64) {
	t.Helper()
	const slack = int64(2 * time.Millisecond)
	require.GreaterOrEqual(t, r, before-slack, "reading before the wall clock's")
	require.LessOrEqual(t, r, after+slack, "reading after the wall clock's")
}

func TestWallClockFollowsTheSystemClock(t *testing.T) {
	for _, resync := range []time.Duration{time.Hour, wallResync, time.Nanosecond} {
		t.Run(resync.String(), func(t *testing.T) {
			c := newWallClock(resync)
			for range 5 {
				before := time.Now().UnixNano()
				r := c.unixNano()
				after := time.Now().UnixNano()
				within(t, before, r, after)
				time.Sleep(3 * time.Millisecond) // the base ages: the monotonic part grows
			}
		})
	}
}

// TestWallClockSeesASteppedWallClock gives the clock a base whose wall
// part is an hour off its monotonic part, as after a step of the wall
// clock by an hour: the readings keep the step while the base is younger
// than resync, then show the system's wall clock again.
func TestWallClockSeesASteppedWallClock(t *testing.T) {
	for _, step := range []time.Duration{time.Hour, -time.Hour} {
		t.Run(step.String(), func(t *testing.T) {
			c := newWallClock(time.Hour) // the stepped base stays however slow the test runs
			now := time.Now()
			c.set(now, now.UnixNano()+int64(step))

			before := time.Now().UnixNano()
			r := c.unixNano()
			after := time.Now().UnixNano()
			within(t, before+int64(step), r, after+int64(step))

			c.resync = time.Nanosecond // the base is now too old
			before = time.Now().UnixNano()
			r = c.unixNano()
			after = time.Now().UnixNano()
			within(t, before, r, after)
		})
	}
}

func TestWallClockConcurrentReaders(t *testing.T) {
	c := newWallClock(time.Microsecond) // rebases all the time
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 2000 {
				before := time.Now().UnixNano()
				r := c.unixNano()
				after := time.Now().UnixNano()
				if r < before-int64(2*time.Millisecond) || r > after+int64(2*time.Millisecond) {
					t.Errorf("reading %d outside [%d, %d]", r, before, after)
					return
				}
			}
		}()
	}
	wg.Wait()
}

func TestQueueReadsTheWallClockOnlyForTheSystemClock(t *testing.T) {
	q, err := Open(t.TempDir(), nil)
	require.NoError(t, err)
	defer q.Close()
	require.NotNil(t, q.wall)
	before := time.Now().UnixNano()
	r := q.now()
	within(t, before, r, time.Now().UnixNano())

	fake := &fixedClock{at: time.Unix(1_000_000, 0)}
	f, err := Open(t.TempDir(), &Options{Clock: fake})
	require.NoError(t, err)
	defer f.Close()
	require.Nil(t, f.wall)
	require.Equal(t, fake.at.UnixNano(), f.now())
}

// fixedClock is a Clock that stands still.
type fixedClock struct{ at time.Time }

func (c *fixedClock) Now() time.Time                         { return c.at }
func (c *fixedClock) After(d time.Duration) <-chan time.Time { return make(chan time.Time) }

// BenchmarkClock compares the queue's reading of the default clock (one
// monotonic read against a base) with a time.Now per reading.
func BenchmarkClock(b *testing.B) {
	var sink int64
	b.Run("time.Now", func(b *testing.B) {
		var c Clock = systemClock{}
		for range b.N {
			sink += c.Now().UnixNano()
		}
	})
	b.Run("wall", func(b *testing.B) {
		c := newWallClock(wallResync)
		for range b.N {
			sink += c.unixNano()
		}
	})
	_ = sink
}

// TestWallClockStalledRebase: a reader that found the base expired and
// stalled before storing its own, while another reader rebased, leaves the
// other's base in place: its reading, taken before the stall, is older
// than readings already returned from that base and must not become what
// every later reading counts from.
func TestWallClockStalledRebase(t *testing.T) {
	c := newWallClock(time.Hour)
	expired := c.at.Load()
	stalled := time.Now() // read before the stall
	c.rebase(expired, time.Now())
	fresh, freshOff := c.at.Load(), c.off.Load()
	require.NotEqual(t, expired, fresh)
	r := c.rebase(expired, stalled)
	require.Equal(t, stalled.UnixNano(), r, "the stalled reader keeps its own reading")
	require.Equal(t, fresh, c.at.Load(), "the stalled reader replaced a base it did not find expired")
	require.Equal(t, freshOff, c.off.Load(), "the stalled reader replaced a base it did not find expired")
	require.GreaterOrEqual(t, c.unixNano(), freshOff+fresh)
}
