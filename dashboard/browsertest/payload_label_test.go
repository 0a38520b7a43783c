package browsertest

import (
	"context"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/dashboard"
)

// TestPayloadLabelFollowsTheWholePayload: the page labelled a payload
// "binary (base64)" only when its preview was sent in base64, so a
// payload that is text in its preview and binary past it was shown as
// text. The label now follows payload_encoding, the whole payload's.
func TestPayloadLabelFollowsTheWholePayload(t *testing.T) {
	ctx := browser(t)
	q, _, url := service(t, &dashboard.Options{PreviewBytes: 8})
	for _, p := range []string{"hello", "abcdefgh\xff\xfe", "\xff\xfe\x00"} {
		_, err := q.Enqueue(context.Background(), []byte(p))
		require.NoError(t, err)
	}
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(url), chromedp.WaitVisible(css(`#list-body tr[data-ref="3"]`))))
	for ref, want := range map[string]struct{ size, payload string }{
		"1": {"5 B", "hello"},
		"2": {"10 B, preview, binary: the preview shows its start as text", "abcdefgh"},
		"3": {"3 B, binary (base64)", "//4A"},
	} {
		require.NoError(t, chromedp.Do(ctx,
			chromedp.Click(css(`#list-body tr[data-ref="`+ref+`"] td:first-child`)),
			waitText("#detail-payload", want.payload),
		), "message %s", ref)
		assert.Equal(t, want.size, text(t, ctx, "#detail-size"), "message %s", ref)
	}
}
