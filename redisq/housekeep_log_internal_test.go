package redisq

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/walq/walq/queue"

	"github.com/stretchr/testify/require"
)

// TestLogSweepSequence: each change of the housekeeper's condition is
// logged once, a pass that fell short of Replicas (ErrNotDurable) apart
// from a failed one: a failure after a short pass is logged, and a short
// pass after a failure is its recovery.
func TestLogSweepSequence(t *testing.T) {
	var b bytes.Buffer
	h := newHandle(nil, nil, "", Options{Logger: slog.New(slog.NewTextHandler(&b, nil))})
	short := fmt.Errorf("%w: 0 of 1 replicas", ErrNotDurable)
	down := errors.New("connection refused")
	const (
		failed = "housekeeping failed"
		again  = "housekeeping works again"
		nd     = "not acknowledged by enough replicas"
		nd2    = "acknowledged by enough replicas again"
	)
	var st sweepState
	for i, step := range []struct {
		err  error
		want []string // in order; nil: nothing logged
	}{
		{nil, nil},
		{short, []string{nd}},
		{short, nil},
		{down, []string{failed}},
		{down, nil},
		{short, []string{again}},
		{nil, []string{nd2}},
		{down, []string{failed}},
		{nil, []string{again}},
	} {
		b.Reset()
		st = h.logSweep(0, step.err, st)
		var got []string
		for _, line := range strings.Split(strings.TrimSpace(b.String()), "\n") {
			for _, m := range []string{failed, again, nd2, nd} {
				if line != "" && strings.Contains(line, m) {
					got = append(got, m)
					break
				}
			}
		}
		require.Equal(t, step.want, got, "step %d (%v)", i, step.err)
	}
}

// TestHousekeepQuietOnClose: a pass that Close cut short (its call
// refused with queue.ErrClosed) is no housekeeping failure: Close logs
// nothing at Warn.
func TestHousekeepQuietOnClose(t *testing.T) {
	var b bytes.Buffer
	h := newHandle(nil, nil, "", Options{Logger: slog.New(slog.NewTextHandler(&b, nil)), Clock: systemClock{}})
	h.wg.Add(1)
	go h.housekeep(func(bool) (int, time.Duration, error) {
		h.once.Do(func() { close(h.closed) }) // Close, as the pass runs
		return 0, -1, queue.ErrClosed
	})
	h.wg.Wait()
	require.NotContains(t, b.String(), "housekeeping failed")
}
