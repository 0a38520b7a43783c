package browsertest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/dashboard"
	"github.com/walq/walq/queue"
)

// actionTimeout is how long the page waits for a requeue or purge.
const actionTimeout = 20 * time.Second

// TestActionThatHangsEndsAsAnError: a requeue or purge waited for the
// service with no timeout, so one the service never answered left the
// operator with no answer and no error, for good. It ends after
// actionTimeout with the error shown, as a load of the list or of the
// figures does, saying that the service may yet do it.
func TestActionThatHangsEndsAsAnError(t *testing.T) {
	ctx := browser(t)
	q, err := queue.Open(t.TempDir(), &queue.Options{ManualRequeue: true})
	require.NoError(t, err)
	t.Cleanup(func() { q.Close() })
	_, err = q.Enqueue(context.Background(), []byte("poison"))
	require.NoError(t, err)
	m, err := q.TryDequeue()
	require.NoError(t, err)
	require.NoError(t, m.DeadLetter("bad"))

	held, release := make(chan struct{}, 1), make(chan struct{})
	h := dashboard.New(dashboard.ForQueue(q), &dashboard.Options{Actions: true})
	mux := http.NewServeMux()
	mux.Handle("/queue/", http.StripPrefix("/queue", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			held <- struct{}{}
			select { // never answered while the test runs
			case <-r.Context().Done():
			case <-release:
			}
			return
		}
		h.ServeHTTP(w, r)
	})))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) }) // before srv.Close, which waits for the held request

	ref := strconv.FormatUint(m.Receipt.Seq, 10) + "@" + m.ID
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/queue/"),
		waitText("#mode", "actions enabled"),
		chromedp.Evaluate[chromedp.Void](`window.alerts = []; window.alert = (msg) => { window.alerts.push(msg); }`),
		chromedp.Click(css(`#tabs button[data-tab="dead"]`)),
		chromedp.Click(css(`#list-body button.requeue[data-ref="`+ref+`"]`)),
	))
	<-held
	msg, err := chromedp.Run(ctx, chromedp.Poll[string](`window.alerts.length > 0 && window.alerts[0]`,
		chromedp.WithPollingTimeout(actionTimeout+10*time.Second)))
	require.NoError(t, err, "the requeue the service never answered never ended")
	assert.Contains(t, msg, "Cannot requeue: no answer in 20 s")
	assert.Contains(t, msg, "may yet do it")
	assert.Equal(t, int64(1), q.Stats().Dead, "the service did nothing")
}
