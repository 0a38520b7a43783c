package browsertest

import (
	"context"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
)

// TestDeadListSeqOfOddID: a dead letter whose id is not UTF-8 is referred
// to as SEQ~HEX; the list's Seq column shows its seq alone.
func TestDeadListSeqOfOddID(t *testing.T) {
	ctx := browser(t)
	q, _, url := service(t, nil)
	_, err := q.Enqueue(context.Background(), []byte("x"), queue.WithID("\xffodd"))
	require.NoError(t, err)
	m, err := q.TryDequeue()
	require.NoError(t, err)
	require.NoError(t, m.DeadLetter("no"))
	row := `#list-body tr[data-ref="1~ff6f6464"]`
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(url),
		chromedp.Click(css(`#tabs button[data-tab="dead"]`)),
		chromedp.WaitVisible(css(row)),
	))
	require.Equal(t, "1", text(t, ctx, row+" td.col-seq"))
}

// TestOddBytesShownAsText: the API sends an id, reason or header that is
// not UTF-8 in base64 twins (id_base64, reason_base64, headers_base64);
// the page shows them as text all the same, each bad byte as U+FFFD, in
// the list and in the message's view.
func TestOddBytesShownAsText(t *testing.T) {
	ctx := browser(t)
	q, _, url := service(t, nil)
	_, err := q.Enqueue(context.Background(), []byte("x"), queue.WithID("\xffodd"),
		queue.WithHeaders(map[string]string{"k\xfe": "v\xfd"}))
	require.NoError(t, err)
	m, err := q.TryDequeue()
	require.NoError(t, err)
	require.NoError(t, m.DeadLetter("bad \xfe byte"))
	row := `#list-body tr[data-ref="1~ff6f6464"]`
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(url),
		chromedp.Click(css(`#tabs button[data-tab="dead"]`)),
		chromedp.WaitVisible(css(row)),
		waitText(row+" td.col-id", "\ufffdodd"),
		waitText(row+" td.col-reason", "bad \ufffd byte"),
		chromedp.Click(css(row+" td:first-child")),
		chromedp.WaitVisible(css(`#detail`)),
		waitText("#detail-id", "\ufffdodd"),
		waitText("#detail-headers tbody tr", "k\ufffdv\ufffd"),
	))
}
