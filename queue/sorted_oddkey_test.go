package queue_test

import (
	"context"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
)

// TestSortedOddKeys: message keys are any bytes: empty, NUL, invalid
// UTF-8, a key that is another's prefix, a key longer than 64 KiB. Each
// key's values come back under that key, whole, from the live queue, after
// a Close (snapshot) and after a crash image (replay of the log).
func TestSortedOddKeys(t *testing.T) {
	keys := []string{"", "\x00", "\x00\x00", "a", "a\x00", "\xff\xfe", "\xc0", strings.Repeat("k", 70_000), "é"}
	for _, reopen := range []string{"live", "close", "crash"} {
		t.Run(reopen, func(t *testing.T) {
			dir := t.TempDir()
			sq, err := queue.OpenSorted[int](dir, &queue.SortedOptions{CacheBytes: -1})
			require.NoError(t, err)
			ctx := context.Background()
			for i, k := range keys {
				require.NoError(t, sq.Publish(ctx, len(keys)-i, k, []byte("v1 of "+k)))
				require.NoError(t, sq.Publish(ctx, 100+i, k, []byte("v2 of "+k)))
			}
			switch reopen {
			case "close":
				require.NoError(t, sq.Close())
				sq, err = queue.OpenSorted[int](dir, nil)
				require.NoError(t, err)
			case "crash":
				img := crashImage(t, dir)
				require.NoError(t, sq.Close())
				sq, err = queue.OpenSorted[int](img, nil)
				require.NoError(t, err)
			}
			defer sq.Close()
			bs, err := sq.TryPull(100)
			require.NoError(t, err)
			var got []string
			for i, b := range bs {
				require.Equal(t, []string{"v1 of " + b.Key, "v2 of " + b.Key}, payloads(b), "batch %d", i)
				got = append(got, b.Key)
			}
			want := append([]string(nil), keys...)
			sort.Strings(want)
			sort.Strings(got)
			require.Equal(t, want, got)
			// Order: by smallest sort key, which is len(keys)-i for key i.
			require.Equal(t, keys[len(keys)-1], bs[0].Key)
		})
	}
}
