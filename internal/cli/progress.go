package cli

import (
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
)

// spinnerDelay is how long an operation runs before its spinner appears,
// so that quick ones draw nothing.
const spinnerDelay = 300 * time.Millisecond

// progress draws a progress bar or a spinner on stderr while long work
// runs. A nil *progress draws nothing; every method accepts one.
type progress struct {
	bar  *progressbar.ProgressBar
	stop chan struct{}  // closed by done to end a spinner's ticker
	wg   sync.WaitGroup // the ticker goroutine
}

// barOpts are the options every walq bar shares.
func (e *env) barOpts(desc string) []progressbar.Option {
	return []progressbar.Option{
		progressbar.OptionSetWriter(e.stderr),
		progressbar.OptionSetDescription(desc),
		progressbar.OptionSetWidth(30),
		progressbar.OptionThrottle(100 * time.Millisecond),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionSetSpinnerChangeInterval(0), // walq ticks spinners itself
	}
}

// bytesBar returns a bar for total bytes of work, or nil when stderr is
// not a terminal.
func (e *env) bytesBar(total int64, desc string) *progress {
	if !e.progTTY || total <= 0 {
		return nil
	}
	opts := append(e.barOpts(desc), progressbar.OptionShowBytes(true), progressbar.OptionUseIECUnits(true))
	return &progress{bar: progressbar.NewOptions64(total, opts...)}
}

// spinner returns a spinner for work of unknown length that shows once it
// has run for spinnerDelay, or nil when stderr is not a terminal.
func (e *env) spinner(desc string) *progress {
	if !e.progTTY {
		return nil
	}
	opts := append(e.barOpts(desc), progressbar.OptionSpinnerType(14), progressbar.OptionSetElapsedTime(true))
	p := &progress{bar: progressbar.NewOptions64(-1, opts...), stop: make(chan struct{})}
	p.wg.Add(1)
	go p.tick()
	return p
}

// tick turns the spinner until done.
func (p *progress) tick() {
	defer p.wg.Done()
	select {
	case <-p.stop:
		return
	case <-time.After(spinnerDelay):
	}
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		p.bar.Add(1)
		select {
		case <-p.stop:
			return
		case <-t.C:
		}
	}
}

// add records n more units of work done.
func (p *progress) add(n int64) {
	if p != nil {
		p.bar.Add64(n)
	}
}

// done clears the bar or spinner.
func (p *progress) done() {
	if p == nil {
		return
	}
	if p.stop != nil {
		close(p.stop)
		p.wg.Wait()
	}
	p.bar.Finish()
}
