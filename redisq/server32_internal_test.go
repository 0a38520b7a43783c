package redisq

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/queue/queuetest"
	"github.com/walq/walq/redisq/internal/redistest"
)

// TestServer32Bit: on a 32-bit redis-server, Lua 5.1's string.format
// casts the argument of '%d' to a C long of 32 bits, so a time in µs
// formatted that way wraps, and every lease deadline, delay and dedup
// stamp with it. The ack queue's suite runs here against this version's
// library with every string.format made to behave so (an argument of a
// '%d' format outside the 32-bit range becomes what the cast gives on
// x86, LONG_MIN), loaded under the library's own name before the queues
// open: it passes only if the library formats no large number with '%d'.
func TestServer32Bit(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	require.NoError(t, rdb.FunctionLoadReplace(ctx, as32Bit(library.code)).Err())
	queuetest.TestAckQueue(t, queuetest.Engine{
		Open: func(t *testing.T, o queuetest.Options) (queue.AckQueue, func() queue.AckQueue) {
			name := fmt.Sprint("server32-", t.Name())
			opts := &Options{AckTimeout: o.AckTimeout, MaxDeliveries: o.MaxDeliveries,
				DedupWindow: o.DedupWindow, Clock: o.Clock, ManualRequeue: true}
			q, err := Open(ctx, rdb, name, opts)
			require.NoError(t, err)
			return q, func() queue.AckQueue {
				q2, err := Open(ctx, rdb, name, opts)
				require.NoError(t, err)
				t.Cleanup(func() { _ = q2.Close() })
				return q2
			}
		},
	})
	have, err := rdb.FunctionList(ctx, redis.FunctionListQuery{LibraryNamePattern: library.name, WithCode: true}).Result()
	require.NoError(t, err)
	require.Len(t, have, 1)
	require.Contains(t, have[0].Code, "fmt32(", "the queues ran the library as a 32-bit server would")
}

// fmt32Lua is string.format as a 32-bit server's Lua 5.1 runs it, for
// the formats that take an integer.
const fmt32Lua = `local function fmt32(f, ...)
  local n, a = select('#', ...), {...}
  if string.find(f, '%d', 1, true) then
    for i = 1, n do
      local v = a[i]
      if type(v) == 'number' and (v >= 2147483648 or v < -2147483648) then a[i] = -2147483648 end
    end
  end
  return string.format(f, unpack(a, 1, n))
end
`

// as32Bit returns a library's code with every string.format call made a
// fmt32 call, fmt32 defined after the library's first two lines (its name
// and LIB).
func as32Bit(code string) string {
	lines := strings.SplitAfterN(code, "\n", 3)
	return lines[0] + lines[1] + fmt32Lua + strings.ReplaceAll(lines[2], "string.format(", "fmt32(")
}
