package dashboard_test

import (
	"context"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/dashboard"
	"github.com/walq/walq/queue"
)

// Key pages are exact whatever bytes the keys hold: a key that is not
// UTF-8 (which JSON cannot carry), that looks like an encoded position or
// that is empty (as the first page's position is) neither repeats nor
// hides a key on the next page.
func TestKeyPagesOfOddKeys(t *testing.T) {
	sq, err := queue.OpenSorted[int](t.TempDir(), nil)
	require.NoError(t, err)
	defer sq.Close()
	keys := []string{"", "a", "k\xfe", "k\xff", "k\xff\x00", "~6b", "~zz", "\xef\xbf\xbd"} // in key (byte) order
	for i, key := range keys {
		for range i + 1 { // key i holds i+1 values: the pages show which key they hold
			require.NoError(t, sq.Publish(context.Background(), i, key, []byte("v")))
		}
	}
	s := server(t, dashboard.ForSorted(sq), nil)
	for _, limit := range []string{"1", "2", "3"} {
		t.Run("limit="+limit, func(t *testing.T) {
			var seen []int // values of each key listed, in order
			after := ""
			for pages := 0; pages < 2*len(keys); pages++ {
				var kp dashboard.KeyPage
				require.Equal(t, 200, getJSON(t, s.URL+"/queue/api/keys?limit="+limit+"&after="+url.QueryEscape(after), &kp))
				for _, k := range kp.Keys {
					seen = append(seen, k.Values)
				}
				if kp.Next == "" {
					break
				}
				after = kp.Next
			}
			assert.Equal(t, []int{1, 2, 3, 4, 5, 6, 7, 8}, seen, "each key once, in key order")
		})
	}
}
