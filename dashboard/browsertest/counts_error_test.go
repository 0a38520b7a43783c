package browsertest

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/dashboard"
	"github.com/walq/walq/internal/unreadable"
)

// TestPageSaysCountsUnread: the counts of a poisoned log that could not
// be read back are the calls', not the log's. The page showed them as any
// others; it now says above them that they could not be checked, and why.
func TestPageSaysCountsUnread(t *testing.T) {
	ctx := browser(t)
	q := unreadable.Queue(t)
	why := q.Stats().CountsErr
	require.Error(t, why)
	require.Equal(t, 1201, unreadable.Ready)
	mux := http.NewServeMux()
	mux.Handle("/queue/", http.StripPrefix("/queue", dashboard.New(dashboard.ForQueue(q), nil)))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/queue/"),
		waitText("#count-ready", "1,201"), // unreadable.Ready, as the page writes it
		waitShown("#counts-error"),
	))
	got := text(t, ctx, "#counts-error")
	assert.True(t, strings.HasPrefix(got, "Counts not checked: the log could not be read back after a failed write;"), got)
	assert.Contains(t, got, why.Error())

	_, _, url := service(t, nil)
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(url), waitText("#count-ready", "0")))
	hidden, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.querySelector("#counts-error").hidden`))
	require.NoError(t, err)
	assert.True(t, hidden, "a healthy queue's counts carry no warning")
}

// waitShown waits until the element sel exists and is not hidden.
func waitShown(sel string) chromedp.Action[chromedp.Void] {
	poll := chromedp.Poll[bool](fmt.Sprintf(`document.querySelector(%q)?.hidden === false`, sel),
		chromedp.WithPollingTimeout(20*time.Second))
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		_, err := poll(ctx, t)
		if err != nil {
			err = fmt.Errorf("waiting for %s to be shown: %w", sel, err)
		}
		return chromedp.Void{}, err
	}
}

// TestPageSaysOldestUnread: the age of the oldest message leaves out a
// never-delivered message whose record cannot be read; the page says so
// above the figures, and why, in words true of either engine: it said
// "from the log" of a Redis queue too, whose stored body is no log.
func TestPageSaysOldestUnread(t *testing.T) {
	ctx := browser(t)
	q := unreadable.OldestDamaged(t)
	why := q.Stats().OldestErr
	require.Error(t, why)
	require.Equal(t, 8, unreadable.OldestReady)
	mux := http.NewServeMux()
	mux.Handle("/queue/", http.StripPrefix("/queue", dashboard.New(dashboard.ForQueue(q), nil)))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/queue/"),
		waitText("#count-ready", "8"), // unreadable.OldestReady
		waitShown("#oldest-error"),
	))
	got := text(t, ctx, "#oldest-error")
	assert.True(t, strings.HasPrefix(got, "Oldest message not read: its stored record could not be read, "+
		"so the age shown leaves it out: "), got)
	assert.Contains(t, got, why.Error())
	countsHidden, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.querySelector("#counts-error").hidden`))
	require.NoError(t, err)
	assert.True(t, countsHidden, "the counts are the log's")

	_, _, url := service(t, nil)
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(url), waitText("#count-ready", "0")))
	hidden, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.querySelector("#oldest-error").hidden`))
	require.NoError(t, err)
	assert.True(t, hidden, "a healthy queue's age carries no warning")
}
