package browsertest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/dashboard"
	"github.com/walq/walq/queue"
)

// TestPendingActionStaysDisabledAcrossRefresh: a requeue's button was
// disabled while the service had not answered, but the list's refresh
// drew the row again with buttons enabled, so a second requeue of the
// same letter could be sent while the first hung. The buttons of a
// letter whose action runs are drawn disabled by every list drawn
// meanwhile (and a double click sends one action); once the action
// ends, they are enabled again.
func TestPendingActionStaysDisabledAcrossRefresh(t *testing.T) {
	ctx := browser(t)
	q, err := queue.Open(t.TempDir(), &queue.Options{ManualRequeue: true})
	require.NoError(t, err)
	t.Cleanup(func() { q.Close() })
	_, err = q.Enqueue(context.Background(), []byte("poison"))
	require.NoError(t, err)
	m, err := q.TryDequeue()
	require.NoError(t, err)
	require.NoError(t, m.DeadLetter("bad"))

	var posts atomic.Int32
	release := make(chan struct{})
	var once sync.Once
	answer := func() { once.Do(func() { close(release) }) }
	h := dashboard.New(dashboard.ForQueue(q), &dashboard.Options{Actions: true})
	mux := http.NewServeMux()
	mux.Handle("/queue/", http.StripPrefix("/queue", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			posts.Add(1)
			select { // answered (doing nothing) once the test says so
			case <-r.Context().Done():
			case <-release:
			}
			return
		}
		h.ServeHTTP(w, r)
	})))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	t.Cleanup(answer) // before srv.Close, which waits for the held request

	ref := strconv.FormatUint(m.Receipt.Seq, 10) + "@" + m.ID
	sel := `#list-body button.requeue[data-ref="` + ref + `"]`
	purge := `#list-body button.purge[data-ref="` + ref + `"]`
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/queue/"),
		waitText("#mode", "actions enabled"),
		chromedp.Evaluate[chromedp.Void](`window.alerts = []; window.alert = (msg) => { window.alerts.push(msg); }`),
		chromedp.Click(css(`#tabs button[data-tab="dead"]`)),
		chromedp.DoubleClick(css(sel)),
	))
	require.Eventually(t, func() bool { return posts.Load() == 1 }, 10*time.Second, 20*time.Millisecond)

	// Wait for the list's refresh to draw the row again.
	_, err = chromedp.Run(ctx, chromedp.Evaluate[bool](`(window.before = document.querySelector('`+sel+`')) !== null`))
	require.NoError(t, err)
	_, err = chromedp.Run(ctx, chromedp.Poll[bool](
		`document.querySelector('`+sel+`') !== null && document.querySelector('`+sel+`') !== window.before`,
		chromedp.WithPollingTimeout(refreshPeriod+10*time.Second)))
	require.NoError(t, err, "the list was not refreshed while the requeue hung")
	disabled, err := chromedp.Run(ctx, chromedp.Evaluate[bool](
		`document.querySelector('`+sel+`').disabled && document.querySelector('`+purge+`').disabled`))
	require.NoError(t, err)
	if !disabled {
		require.NoError(t, chromedp.Do(ctx, chromedp.Click(css(sel))))
		require.Eventually(t, func() bool { return posts.Load() == 2 }, 10*time.Second, 20*time.Millisecond)
		t.Logf("a second requeue of the same letter was sent while the first hangs: posts=%d", posts.Load())
	}
	require.True(t, disabled, "the refreshed list enabled the buttons of the letter whose requeue hangs")
	assert.Equal(t, int32(1), posts.Load(), "requeues sent")

	// Once the service answers, the letter's buttons are enabled again.
	answer()
	_, err = chromedp.Run(ctx, chromedp.Poll[bool](
		`document.querySelector('`+sel+`')?.disabled === false && document.querySelector('`+purge+`')?.disabled === false`,
		chromedp.WithPollingTimeout(20*time.Second)))
	assert.NoError(t, err, "the buttons stayed disabled after the requeue ended")
}
