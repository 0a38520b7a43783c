package redisq

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
)

// TestHousekeepDropsLogOnce: a pass whose connection dropped (with no
// retries in the client, each stale pooled connection fails the pass
// that draws it) is passed again at once, so a dropped connection
// between passes that work logs no failure, and a server that stays
// down logs one Warn for the outage, not one per connection, and one
// Info when it is back.
func TestHousekeepDropsLogOnce(t *testing.T) {
	for _, c := range []struct {
		name   string
		passes []error // what each pass returns, in order; the handle closes after the last
		warns  int
		agains int
	}{
		{"DropBetweenGoodPasses", []error{nil, io.EOF, nil, io.EOF, nil, io.EOF, nil}, 0, 0},
		{"Outage", []error{nil, io.EOF, io.EOF, io.EOF, io.EOF, io.EOF, io.EOF, io.EOF, io.EOF, nil, io.EOF, nil}, 1, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			var b bytes.Buffer
			h := newHandle(nil, nil, "", Options{Logger: slog.New(slog.NewTextHandler(&b, nil)), Clock: systemClock{}, restless: true})
			i := 0
			h.wg.Add(1)
			go h.housekeep(func(bool) (int, time.Duration, error) {
				if i == len(c.passes) { // a pass after Close, which rest may let start
					return 0, -1, queue.ErrClosed
				}
				err := c.passes[i]
				if i++; i == len(c.passes) {
					h.once.Do(func() { close(h.closed) })
				}
				if err != nil {
					err = fmt.Errorf("redisq: housekeep: %w", err)
				}
				return 0, -1, err
			})
			h.wg.Wait()
			require.Equal(t, len(c.passes), i)
			require.Equal(t, c.warns, strings.Count(b.String(), "housekeeping failed"), b.String())
			require.Equal(t, c.agains, strings.Count(b.String(), "housekeeping works again"), b.String())
		})
	}
}
