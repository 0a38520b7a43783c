package redisq

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"
	"github.com/walq/walq/redisq/internal/redistest"
)

// TestSortedPlaceholderMemory measures the memory (MEMORY USAGE) and the
// encoding (OBJECT ENCODING) of each key of a small sorted queue, three
// values published on two keys, one pulled and acked, written by this
// version's library and by the release before placeholders (27399a9,
// testdata), side by side on one server, with payloads of 10 and 100
// bytes. It asserts nothing; run with
// WALQ_REDISQ_MEMORY=1 go test -run TestSortedPlaceholderMemory -v
// (bench/results/redisq-placeholder-memory-2026-12-06.txt).
func TestSortedPlaceholderMemory(t *testing.T) {
	if os.Getenv("WALQ_REDISQ_MEMORY") == "" {
		t.Skip("a measurement: set WALQ_REDISQ_MEMORY=1 to run it")
	}
	srv := redistest.Start(t)
	ctx := context.Background()
	rdb := srv.Client()
	require.NoError(t, rdb.FunctionLoad(ctx, placeholderlessSortedLibrary).Err())
	libs := map[string]string{"27399a9": placeholderlessSortedName, "this": sortedLibrary.name}
	for _, c := range []struct {
		v       string
		payload int
	}{{"27399a9", 10}, {"this", 10}, {"27399a9", 100}, {"this", 100}} {
		v := c.v
		s, err := OpenSorted[int64](ctx, rdb, fmt.Sprintf("memory-%s-%d", v, c.payload), &SortedOptions{Options: Options{TrustServer: true, ManualRequeue: true}})
		require.NoError(t, err)
		require.NoError(t, s.Close()) // its keys and names serve; no call of its may write meanwhile
		if v == "27399a9" {
			require.NoError(t, rdb.Del(ctx, s.keys...).Err()) // the placeholders this version's Open wrote
		}
		call := func(fn, op string, args ...any) any {
			now := time.Now()
			argv := append([]any{s.wake, unixMicros(now), s.o.MaxDeliveries, "0", span(now, s.o.AckTimeout), "1", op}, args...)
			r, err := rdb.FCall(ctx, libs[v]+"_"+fn, s.keys, argv...).Result()
			require.NoError(t, err)
			return r
		}
		for i := range 3 {
			part, err := sortPart(int64(i))
			require.NoError(t, err)
			b, err := msgpack.Marshal(&sortedValue{Sort: part, At: time.Now().UnixNano(), Payload: make([]byte, c.payload)})
			require.NoError(t, err)
			call("grow", "publish", fmt.Sprintf("key-%d", i%2), part, b)
		}
		r, _ := call("grow", "pull", 1, "", "1").([]any)
		got, _ := r[0].([]any)
		require.Len(t, got, 1)
		call("settle", "ack", got[0].([]any)[0])
		total := int64(0)
		for _, k := range s.keys {
			n, err := rdb.MemoryUsage(ctx, k).Result()
			if err != nil { // absent
				t.Logf("%-8s %-34s absent", v, k)
				continue
			}
			enc, err := rdb.ObjectEncoding(ctx, k).Result()
			require.NoError(t, err)
			total += n
			t.Logf("%-8s %-34s %6d bytes  %s", v, k, n, enc)
		}
		t.Logf("%-8s total %d bytes (payload %d bytes)", v, total, c.payload)
	}
}
