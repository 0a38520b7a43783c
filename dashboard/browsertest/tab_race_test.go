package browsertest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/dashboard"
	"github.com/walq/walq/queue"
)

// gated serves h, holding each request for the ready list until the test
// releases it; held receives each held request as it arrives.
func gated(h http.Handler, held chan<- struct{}, release <-chan struct{}) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/messages" && r.URL.Query().Get("state") == "ready" {
			held <- struct{}{}
			<-release
		}
		h.ServeHTTP(w, r)
	})
}

// TestListShowsTheTabChosenWhileALoadIsSlow: the page loaded one list at
// a time and dropped a load asked for while another ran. An operator who
// opened the dead letters while the ready list was still loading saw the
// ready messages under the dead letters' tab, with requeue and purge
// buttons on them, until the next refresh. The list shows what the tab
// and page chosen last ask for.
func TestListShowsTheTabChosenWhileALoadIsSlow(t *testing.T) {
	ctx := browser(t)
	q, err := queue.Open(t.TempDir(), &queue.Options{ManualRequeue: true})
	require.NoError(t, err)
	t.Cleanup(func() { q.Close() })
	bg := context.Background()
	deadID, err := q.Enqueue(bg, []byte("dead"))
	require.NoError(t, err)
	m, err := q.TryDequeue()
	require.NoError(t, err)
	require.NoError(t, m.DeadLetter("bad"))
	_, err = q.Enqueue(bg, []byte("ready"))
	require.NoError(t, err)

	held, release := make(chan struct{}, 16), make(chan struct{})
	mux := http.NewServeMux()
	mux.Handle("/queue/", http.StripPrefix("/queue",
		gated(dashboard.New(dashboard.ForQueue(q), &dashboard.Options{Actions: true}), held, release)))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })

	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/queue/")))
	<-held // the ready list is loading
	require.NoError(t, chromedp.Do(ctx, chromedp.Click(css(`#tabs button[data-tab="dead"]`))))
	release <- struct{}{} // the ready list's load ends after the dead tab was chosen
	require.NoError(t, chromedp.Do(ctx, chromedp.WaitVisible(css(`#list-body tr[data-ref]`))))
	ids, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](
		`[...document.querySelectorAll("#list-body tr[data-ref]")].map((tr) => tr.dataset.id)`))
	require.NoError(t, err)
	require.Equal(t, []string{deadID}, ids, "the dead letters' tab lists the dead letters")
}
