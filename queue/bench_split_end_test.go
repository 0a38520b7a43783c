package queue_test

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
)

// A failed call ends a run of BenchmarkCycleSplit (cycleSplit), and the
// run leaves none of its goroutines behind: a goroutine that waited for
// the acks of messages never enqueued stayed blocked for the life of the
// process.
func TestCycleSplitEndsWithoutGoroutines(t *testing.T) {
	t.Setenv("WALQ_BENCH_PAYLOAD", fmt.Sprint(5<<20)) // above the default MaxMessageSize: every Enqueue fails
	r := testing.Benchmark(func(b *testing.B) { cycleSplit(b, queue.SyncNever, 4, 4) })
	require.Zero(t, r.N, "the run failed")
	require.Empty(t, goroutinesIn("queue_test.cycleSplit"), "goroutines of the failed run left behind")
}

// goroutinesIn returns the stacks of the goroutines running fn, or created
// by it and still running.
func goroutinesIn(fn string) []string {
	buf := make([]byte, 1<<20)
	var out []string
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		if strings.Contains(g, fn) {
			out = append(out, g)
		}
	}
	return out
}
