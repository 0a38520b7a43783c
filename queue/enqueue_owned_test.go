package queue_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walq/walq/queue"
)

// TestEnqueueCopiesPayload checks that a producer may reuse its payload's
// buffer once Enqueue or EnqueueAsync returns (EnqueueAsync: before its
// Pending completes): the message delivered is the payload as it was at
// the call, small or large, with or without headers, in every sync mode,
// also after a reopen.
func TestEnqueueCopiesPayload(t *testing.T) {
	ctx := context.Background()
	for _, sync := range []queue.SyncMode{queue.SyncAlways, queue.SyncNever} {
		for _, size := range []int{100, 256, 257, 1024, 64 << 10} {
			for _, async := range []bool{false, true} {
				t.Run(fmt.Sprintf("sync%d/%dB/async=%v", sync, size, async), func(t *testing.T) {
					dir := t.TempDir()
					q, err := queue.Open(dir, &queue.Options{Sync: sync})
					require.NoError(t, err)
					var want [][]byte
					var pend []*queue.Pending
					buf := make([]byte, size)
					for i, opts := range [][]queue.EnqueueOption{nil, {queue.WithHeaders(map[string]string{"h": "v"})}, {queue.WithID("own")}} {
						for j := range buf {
							buf[j] = byte('a' + i)
						}
						want = append(want, bytes.Clone(buf))
						if async {
							p, err := q.EnqueueAsync(ctx, buf, opts...)
							require.NoError(t, err)
							pend = append(pend, p)
						} else {
							_, err := q.Enqueue(ctx, buf, opts...)
							require.NoError(t, err)
						}
						for j := range buf { // the caller reuses its buffer at once
							buf[j] = 'X'
						}
					}
					for _, p := range pend {
						require.NoError(t, p.Wait(ctx))
					}
					require.NoError(t, q.Close())
					q, err = queue.Open(dir, &queue.Options{Sync: sync})
					require.NoError(t, err)
					defer q.Close()
					for i, w := range want {
						m, err := q.Dequeue(ctx)
						require.NoError(t, err)
						require.True(t, bytes.Equal(w, m.Payload), "message %d: got %q..., want %q...", i, m.Payload[:8], w[:8])
					}
				})
			}
		}
	}
}
