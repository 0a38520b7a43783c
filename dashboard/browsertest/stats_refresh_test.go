package browsertest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/dashboard"
	"github.com/walq/walq/queue"
)

// statsTimeout is how long the page waits for its figures before it
// gives up on them; statsPeriod how often it loads them.
const (
	statsTimeout = 10 * time.Second
	statsPeriod  = 2 * time.Second
)

// hungStats counts the figures' requests that a service that hangs holds:
// how many arrived, how many it holds now, and the most it held at once.
type hungStats struct {
	mu      sync.Mutex
	arrived int
	held    int
	most    int
	hang    bool          // requests are held until the client gives up or release
	release chan struct{} // closed to answer every held request
}

// serve holds a stats request while hang is set, until the client gives
// up on it or the test ends.
func (s *hungStats) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	s.mu.Lock()
	s.arrived++
	hang := s.hang
	if hang {
		s.held++
		s.most = max(s.most, s.held)
	}
	s.mu.Unlock()
	if hang {
		select {
		case <-r.Context().Done():
		case <-s.release:
		}
		s.mu.Lock()
		s.held--
		s.mu.Unlock()
		return
	}
	next.ServeHTTP(w, r)
}

func (s *hungStats) counts() (arrived, most int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.arrived, s.most
}

// TestStatsLoadsDoNotPileUp: the page loaded its figures every two
// seconds whether or not the last load had ended, so a service that hung
// gathered one more hung request every tick. The timer now skips its
// load while the last one runs, and a load that hangs ends after
// statsTimeout, so the page asks again, one request at a time, and shows
// the figures once the service answers.
func TestStatsLoadsDoNotPileUp(t *testing.T) {
	ctx := browser(t)
	q, err := queue.Open(t.TempDir(), &queue.Options{ManualRequeue: true})
	require.NoError(t, err)
	t.Cleanup(func() { q.Close() })
	s := &hungStats{release: make(chan struct{})}
	h := dashboard.New(dashboard.ForQueue(q), nil)
	mux := http.NewServeMux()
	mux.Handle("/queue/", http.StripPrefix("/queue", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/stats" {
			s.serve(w, r, h)
			return
		}
		h.ServeHTTP(w, r)
	})))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(s.release) }) // before srv.Close, which waits for the held requests

	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/queue/"), waitText("#count-ready", "0")))
	s.mu.Lock()
	s.hang = true
	before := s.arrived
	s.mu.Unlock()
	// Wait for a second load after the first that hangs: after a timeout
	// on the fixed page, at the next tick on the old one; then watch two
	// more ticks.
	deadline := time.Now().Add(statsTimeout + 2*statsPeriod + 5*time.Second)
	for arrived, _ := s.counts(); arrived < before+2 && time.Now().Before(deadline); arrived, _ = s.counts() {
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(2 * statsPeriod)
	arrived, most := s.counts()
	require.GreaterOrEqual(t, arrived, before+2, "a hung load of the figures was never given up: no load followed it")
	assert.Equal(t, 1, most, "hung loads of the figures held at once")

	s.mu.Lock()
	s.hang = false
	s.mu.Unlock()
	_, err = q.Enqueue(context.Background(), []byte("m"))
	require.NoError(t, err)
	require.NoError(t, chromedp.Do(ctx, waitText("#count-ready", "1")), "the figures once the service answers again")
}
