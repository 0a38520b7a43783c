package browsertest

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

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

// TestDetailShowsTheMessageChosenLast: a message view whose load ended
// after the operator had chosen another message replaced that one's: the
// detail showed the message chosen first under the one chosen last. The
// detail shows the message chosen last.
func TestDetailShowsTheMessageChosenLast(t *testing.T) {
	ctx := browser(t)
	q, err := queue.Open(t.TempDir(), &queue.Options{ManualRequeue: true})
	require.NoError(t, err)
	t.Cleanup(func() { q.Close() })
	first, err := q.Enqueue(context.Background(), []byte("first"))
	require.NoError(t, err)
	last, err := q.Enqueue(context.Background(), []byte("last"))
	require.NoError(t, err)

	held, release, served := make(chan struct{}, 1), make(chan struct{}), make(chan struct{}, 1)
	h := dashboard.New(dashboard.ForQueue(q), nil)
	mux := http.NewServeMux()
	mux.Handle("/queue/", http.StripPrefix("/queue", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/message" && r.URL.Query().Get("ref") == "1" {
			held <- struct{}{}
			<-release
			defer func() { served <- struct{}{} }()
		}
		h.ServeHTTP(w, r)
	})))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	// Every message view the page reads counts in __read once what the page
	// does with it has run (its awaits resume in microtasks, before the
	// timer's task).
	count := `(() => { const json = Response.prototype.json;
		Response.prototype.json = function () { const p = json.call(this);
			if (this.url.includes("api/message?")) p.finally(() => setTimeout(() => { window.__read = (window.__read || 0) + 1; }, 0));
			return p; }; })()`
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/queue/"),
		chromedp.WaitVisible(css(`#list-body tr[data-id="`+last+`"]`)),
	))
	_, err = chromedp.Run(ctx, chromedp.Evaluate[any](count))
	require.NoError(t, err)
	require.NoError(t, chromedp.Do(ctx, chromedp.Click(css(`#list-body tr[data-id="`+first+`"] td:first-child`))))
	<-held // the first message's view is loading
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(css(`#list-body tr[data-id="`+last+`"] td:first-child`)),
		waitText("#detail-id", last),
	))
	reads, err := chromedp.Run(ctx, chromedp.Evaluate[int](`window.__read || 0`))
	require.NoError(t, err)
	close(release) // the first message's view ends after the last was chosen
	<-served
	_, err = chromedp.Run(ctx, chromedp.Poll[bool](fmt.Sprintf(`(window.__read || 0) > %d`, reads),
		chromedp.WithPollingTimeout(20*time.Second)))
	require.NoError(t, err, "the first message's view was never read")
	require.Equal(t, last, text(t, ctx, "#detail-id"), "the detail shows the message chosen last")
	require.Equal(t, "last", text(t, ctx, "#detail-payload"))
}
