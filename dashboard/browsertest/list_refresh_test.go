package browsertest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/dashboard"
	"github.com/walq/walq/queue"
)

// refreshPeriod is how often the page reloads the list it shows, and
// listTimeout how long it waits for a list before it gives up on it.
const (
	refreshPeriod = 5 * time.Second
	listTimeout   = 20 * time.Second
)

// TestListRefreshesAfterAnOldLoadHangs: the timer skipped its reload
// while any list load ran, so one that never ended, even a load another
// had replaced, stopped the list's refresh for good: a message enqueued
// after it never showed. The list is reloaded on the timer once the load
// chosen last has ended.
func TestListRefreshesAfterAnOldLoadHangs(t *testing.T) {
	ctx := browser(t)
	q, err := queue.Open(t.TempDir(), &queue.Options{ManualRequeue: true})
	require.NoError(t, err)
	t.Cleanup(func() { q.Close() })
	bg := context.Background()
	dead, err := q.Enqueue(bg, []byte("dead"))
	require.NoError(t, err)
	m, err := q.TryDequeue()
	require.NoError(t, err)
	require.NoError(t, m.DeadLetter("bad"))
	first, err := q.Enqueue(bg, []byte("first"))
	require.NoError(t, err)

	url, held := hangFirstReadyList(t, q)
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(url)))
	<-held // the first ready list hangs
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(css(`#tabs button[data-tab="dead"]`)),
		chromedp.WaitVisible(css(`#list-body tr[data-id="`+dead+`"]`)),
		chromedp.Click(css(`#tabs button[data-tab="ready"]`)),
		chromedp.WaitVisible(css(`#list-body tr[data-id="`+first+`"]`)),
	))
	later, err := q.Enqueue(bg, []byte("later"))
	require.NoError(t, err)
	_, err = chromedp.Run(ctx, chromedp.Poll[bool](
		`document.querySelector('#list-body tr[data-id="`+later+`"]') !== null`,
		chromedp.WithPollingTimeout(refreshPeriod+5*time.Second)))
	require.NoError(t, err, "the message enqueued after the hung load never showed in the ready list")
}

// TestListRefreshesAfterTheLastLoadHangs: a list load that never ends,
// the last asked for, ends as an error after listTimeout, and the timer
// reloads the list: a message enqueued while it hung shows.
func TestListRefreshesAfterTheLastLoadHangs(t *testing.T) {
	ctx := browser(t)
	q, err := queue.Open(t.TempDir(), &queue.Options{ManualRequeue: true})
	require.NoError(t, err)
	t.Cleanup(func() { q.Close() })
	url, held := hangFirstReadyList(t, q)

	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(url)))
	<-held // the first ready list hangs, and no other load is asked for
	later, err := q.Enqueue(context.Background(), []byte("later"))
	require.NoError(t, err)
	_, err = chromedp.Run(ctx, chromedp.Poll[bool](
		`document.querySelector('#list-body tr[data-id="`+later+`"]') !== null`,
		chromedp.WithPollingTimeout(listTimeout+refreshPeriod+5*time.Second)))
	require.NoError(t, err, "the message enqueued while the list hung never showed")
}

// hangFirstReadyList serves q's dashboard under /queue/ (its URL is
// returned), but the first request for the ready list never returns
// while the test runs; held receives when it arrives.
func hangFirstReadyList(t *testing.T, q *queue.Queue) (string, <-chan struct{}) {
	t.Helper()
	held, release := make(chan struct{}, 1), make(chan struct{})
	var readyLists atomic.Int32
	h := dashboard.New(dashboard.ForQueue(q), nil)
	mux := http.NewServeMux()
	mux.Handle("/queue/", http.StripPrefix("/queue", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/messages" && r.URL.Query().Get("state") == "ready" && readyLists.Add(1) == 1 {
			held <- struct{}{}
			<-release
		}
		h.ServeHTTP(w, r)
	})))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	return srv.URL + "/queue/", held
}
