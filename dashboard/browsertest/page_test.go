package browsertest

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/dashboard"
	"github.com/walq/walq/queue"
)

var screenshot = flag.String("screenshot", "", "write a screenshot of the page after a short workload to this PNG file")

// chromium returns the browser binary, skipping the test when there is
// none, or failing it under CI.
func chromium(t *testing.T) string {
	t.Helper()
	names := []string{os.Getenv("WALQ_CHROMIUM"), "chromium", "chromium-browser", "google-chrome", "headless-shell"}
	for _, n := range names {
		if n == "" {
			continue
		}
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("no Chromium found (apt-get install -y chromium); the browser tests must run in CI")
	}
	t.Skip("no Chromium found; install it or set WALQ_CHROMIUM")
	return ""
}

// browser returns a chromedp context on a new headless browser.
func browser(t *testing.T) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)),
		chromedp.NoSandbox, // CI runs as root, where Chromium's sandbox cannot start
		chromedp.WindowSize(1280, 1000),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, cancelCtx := chromedp.NewContext(actx)
	require.NoError(t, chromedp.Do(bctx), "start the browser") // without a timeout: it would stop the browser
	ctx, cancelTimeout := context.WithTimeout(bctx, 2*time.Minute)
	t.Cleanup(func() { cancelTimeout(); cancelCtx(); cancelAlloc() })
	return ctx
}

// service opens a queue and serves its dashboard under /queue/, as an
// application mounts it.
func service(t *testing.T, opts *dashboard.Options) (*queue.Queue, *dashboard.Handler, string) {
	t.Helper()
	q, err := queue.Open(t.TempDir(), &queue.Options{ManualRequeue: true})
	require.NoError(t, err)
	t.Cleanup(func() { q.Close() })
	h := dashboard.New(dashboard.ForQueue(q), opts)
	mux := http.NewServeMux()
	mux.Handle("/queue/", http.StripPrefix("/queue", h))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return q, h, srv.URL + "/queue/"
}

// waitText waits until the element sel shows want.
func waitText(sel, want string) chromedp.Action[chromedp.Void] {
	poll := chromedp.Poll[bool](fmt.Sprintf(`document.querySelector(%q)?.textContent === %q`, sel, want),
		chromedp.WithPollingTimeout(20*time.Second))
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		_, err := poll(ctx, t)
		if err != nil {
			err = fmt.Errorf("waiting for %s to show %q: %w", sel, want, err)
		}
		return chromedp.Void{}, err
	}
}

type css = chromedp.CSS

// count returns how many elements match sel.
func count(t *testing.T, ctx context.Context, sel string) int {
	t.Helper()
	n, err := chromedp.Run(ctx, chromedp.Evaluate[int](fmt.Sprintf(`document.querySelectorAll(%q).length`, sel)))
	require.NoError(t, err)
	return n
}

// text returns the text of the first element that matches sel.
func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.TextContent(css(sel)))
	require.NoError(t, err)
	return s
}

func TestPageShowsTheQueueAndRequeuesADeadLetter(t *testing.T) {
	ctx := browser(t)
	q, _, url := service(t, &dashboard.Options{Title: "orders", Actions: true})
	bg := context.Background()
	for i := 0; i < 7; i++ {
		_, err := q.Enqueue(bg, []byte(fmt.Sprintf(`{"order":%d}`, i)), queue.WithHeaders(map[string]string{"tenant": "acme"}))
		require.NoError(t, err)
	}
	dead, err := q.TryDequeue()
	require.NoError(t, err)
	require.NoError(t, dead.DeadLetter("card declined"))
	_, err = q.TryDequeue() // stays in flight
	require.NoError(t, err)
	st := q.Stats()
	require.Equal(t, int64(5), st.Ready)

	// The counts on the page are the queue's.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(url),
		waitText("#title", "orders"),
		waitText("#count-ready", strconv.FormatInt(st.Ready, 10)),
		waitText("#count-in-flight", strconv.FormatInt(st.InFlight, 10)),
		waitText("#count-dead", strconv.FormatInt(st.Dead, 10)),
		waitText("#mode", "actions enabled"),
	))
	require.NoError(t, chromedp.Do(ctx, chromedp.WaitVisible(css(`#list-body tr[data-ref]`))))
	assert.Equal(t, 5, count(t, ctx, "#list-body tr[data-ref]"), "the ready tab lists the ready messages")

	// The dead letter's headers and payload are shown; then it is requeued.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(css(`#tabs button[data-tab="dead"]`)),
		chromedp.WaitVisible(css(`#list-body tr[data-id="`+dead.ID+`"]`)),
		chromedp.Click(css(`#list-body tr[data-id="`+dead.ID+`"] td:first-child`)),
		chromedp.WaitVisible(css(`#detail`)),
		waitText("#detail-id", dead.ID),
	))
	assert.Equal(t, string(dead.Payload), text(t, ctx, "#detail-payload"))
	assert.Equal(t, "acme", text(t, ctx, "#detail-headers td"))
	assert.Contains(t, text(t, ctx, "#list-body tr[data-ref] td.col-reason"), "card declined")
	// The dead letter is named by its seq and id (the seq alone could name
	// another message after a crash); the Seq column shows the seq.
	seq := strconv.FormatUint(dead.Receipt.Seq, 10)
	assert.Equal(t, seq, text(t, ctx, "#list-body tr[data-ref] td.col-seq"))
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(css(`#list-body button.requeue[data-ref="`+seq+"@"+dead.ID+`"]`)),
		waitText("#count-dead", "0"),
		waitText("#count-ready", "6"),
		chromedp.WaitVisible(css(`#empty`)),
	))
	assert.Equal(t, int64(0), q.Stats().Dead)

	// Delivered again: it is the first ready message by sequence.
	m, err := q.TryDequeue()
	require.NoError(t, err)
	assert.Equal(t, dead.ID, m.ID)
	assert.Equal(t, string(dead.Payload), string(m.Payload))
	assert.Equal(t, 1, m.Deliveries, "a requeued dead letter starts its deliveries again")
}

func TestReadOnlyPageOffersNoActions(t *testing.T) {
	ctx := browser(t)
	q, _, url := service(t, nil)
	_, err := q.Enqueue(context.Background(), []byte("x"))
	require.NoError(t, err)
	m, err := q.TryDequeue()
	require.NoError(t, err)
	require.NoError(t, m.DeadLetter("no"))
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(url),
		waitText("#mode", "read-only"),
		chromedp.Click(css(`#tabs button[data-tab="dead"]`)),
		chromedp.WaitVisible(css(`#list-body tr[data-ref]`)),
	))
	assert.Zero(t, count(t, ctx, "#list-body button"))
	assert.Equal(t, int64(1), q.Stats().Dead)
}

// TestScreenshot runs producers and consumers for a while and writes the
// page as it looks to the file named by -screenshot.
func TestScreenshot(t *testing.T) {
	if *screenshot == "" {
		t.Skip("no -screenshot file given")
	}
	ctx := browser(t)
	q, h, url := service(t, &dashboard.Options{Title: "orders", Actions: true})
	wctx, stop := context.WithCancel(context.Background())
	defer stop()
	go h.Run(wctx, time.Second)
	go work(wctx, q)
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(url), chromedp.Sleep(45*time.Second)))
	stop()
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(css(`#tabs button[data-tab="dead"]`)),
		chromedp.WaitVisible(css(`#list-body tr[data-ref]`)),
		chromedp.Click(css(`#list-body tr[data-ref] td:first-child`)),
		chromedp.WaitVisible(css(`#detail`)),
		chromedp.Sleep(2500*time.Millisecond),
	))
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(*screenshot, png, 0o644))
}

// work enqueues orders at a varying rate and consumes them a little more
// slowly; a few fail for good, a few are retried.
func work(ctx context.Context, q *queue.Queue) {
	go func() {
		for i := 0; ctx.Err() == nil; i++ {
			body := fmt.Sprintf(`{"order":%d,"customer":"c-%03d","total":%d.%02d}`, i, i%97, 10+i%90, i%100)
			_, _ = q.Enqueue(ctx, []byte(body), queue.WithHeaders(map[string]string{"tenant": "acme", "source": "checkout"}))
			time.Sleep(time.Duration(15+10*(i/150%3)) * time.Millisecond)
		}
	}()
	for i := 0; ctx.Err() == nil; i++ {
		m, err := q.Dequeue(ctx)
		if err != nil {
			return
		}
		time.Sleep(22 * time.Millisecond)
		switch {
		case i%53 == 0:
			_ = m.DeadLetter("card declined")
		case i%31 == 0:
			_ = m.Nack(0)
		default:
			_ = m.Ack()
		}
	}
}
