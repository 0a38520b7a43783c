package browsertest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/dashboard"
	"github.com/walq/walq/queue"
)

// TestPageOfAnySortedQueue: a sorted queue seen through the method set
// every engine offers (ForSortedQueue, how the Redis backend's is shown)
// has no key list: the page hides the Keys tab, shows the figures, lists
// the dead values and requeues one.
func TestPageOfAnySortedQueue(t *testing.T) {
	ctx := browser(t)
	s, err := queue.OpenSorted[int64](t.TempDir(), &queue.SortedOptions{Options: queue.Options{ManualRequeue: true}})
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	bg := context.Background()
	require.NoError(t, s.Publish(bg, 7, "a", []byte("broken")))
	require.NoError(t, s.Publish(bg, 8, "b", []byte("next")))
	bs, err := s.TryPull(1)
	require.NoError(t, err)
	require.NoError(t, bs[0].DeadLetter("bad input"))
	var src queue.SortedQueue[int64] = s // the shared method set alone
	mux := http.NewServeMux()
	mux.Handle("/queue/", http.StripPrefix("/queue", dashboard.New(dashboard.ForSortedQueue(src), &dashboard.Options{Actions: true})))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/queue/"),
		waitText("#kind", "sorted"),
		waitText("#count-ready", "1"),
		waitText("#count-dead", "1"),
		waitText("#mode", "actions enabled"),
		chromedp.Click(css(`#tabs button[data-tab="dead"]`)),
		chromedp.WaitVisible(css(`#list-body tr[data-id="a/1"]`)),
	))
	hidden, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.querySelector('[data-tab="keys"]').hidden`))
	require.NoError(t, err)
	assert.True(t, hidden, "no key list through the shared method set")
	assert.Equal(t, "bad input", text(t, ctx, "#list-body tr[data-id=\"a/1\"] td.col-reason"))
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(css(`#list-body button.requeue`)),
		waitText("#count-dead", "0"),
		waitText("#count-ready", "2"),
	))
	bs, err = s.TryPull(1)
	require.NoError(t, err)
	assert.Equal(t, "broken", string(bs[0].Values[0].Payload), "the requeued value is pending again, first by its sort key")
}
