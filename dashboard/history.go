package dashboard

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"
)

// Sample is the figures at one moment, for the page's charts.
type Sample struct {
	At       time.Time `json:"at"`
	Ready    int64     `json:"ready"`
	InFlight int64     `json:"in_flight"`
	Delayed  int64     `json:"delayed"`
	Dead     int64     `json:"dead"`
	Enqueued uint64    `json:"enqueued"`
	Acked    uint64    `json:"acked"`
}

// history keeps the samples of the last window, at least every second
// apart.
type history struct {
	mu      sync.Mutex
	window  time.Duration
	samples []Sample // oldest first
}

// add records s unless the last sample is less than a second old, and
// drops the samples older than the window.
func (h *history) add(s Stats, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if n := len(h.samples); n > 0 && now.Sub(h.samples[n-1].At) < time.Second {
		return
	}
	h.samples = append(h.samples, Sample{At: now, Ready: s.Ready, InFlight: s.InFlight, Delayed: s.Delayed,
		Dead: s.Dead, Enqueued: s.Enqueued, Acked: s.Acked})
	drop := 0
	for drop < len(h.samples) && now.Sub(h.samples[drop].At) > h.window {
		drop++
	}
	h.samples = append(h.samples[:0], h.samples[drop:]...)
}

// list returns a copy of the samples.
func (h *history) list() []Sample {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Sample(nil), h.samples...)
}

// Run samples the figures every interval until ctx ends, so that the page
// shows the minutes before it was opened. A sample whose figures cannot
// be read (the queue closed, the engine failing) is not taken, and is
// logged through Options.Logger (slog.Default() when it is nil): an
// Error line when the failure begins or its error changes, an Info line
// when the figures can be read again. It returns ctx's error.
func (h *Handler) Run(ctx context.Context, interval time.Duration) error {
	t := time.NewTicker(max(interval, time.Second))
	defer t.Stop()
	failing := "" // the error of the last sample; "" when it was taken
	for {
		_, err := h.sample(ctx)
		failing = h.reportSample(ctx, err, failing)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// reportSample logs err, the error of Run's sample, unless it is the one
// last logged (failing) or comes from ctx's end, and logs the end of a
// failure; it returns the error now failing ("" for none).
func (h *Handler) reportSample(ctx context.Context, err error, failing string) string {
	log := h.opts.Logger
	if log == nil {
		log = slog.Default()
	}
	switch {
	case err == nil:
		if failing != "" {
			log.Info("dashboard: queue figures readable again")
		}
		return ""
	case ctx.Err() != nil && errors.Is(err, ctx.Err()):
		return failing
	case err.Error() != failing:
		log.Error("dashboard: cannot read the queue's figures", "err", err)
	}
	return err.Error()
}

// sample records the current figures in the history.
func (h *Handler) sample(ctx context.Context) (Stats, error) {
	s, err := h.src.Stats(ctx)
	if err == nil {
		h.hist.add(s, h.now())
	}
	return s, err
}
