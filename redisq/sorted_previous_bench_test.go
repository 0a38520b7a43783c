package redisq

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"
	"github.com/walq/walq/redisq/internal/redistest"
)

// The sorted library of the release before its hashes held placeholders
// (27399a9), as FUNCTION LOAD takes it.
var (
	//go:embed testdata/sorted-library-27399a9.lua
	placeholderlessSortedLibrary string
)

const placeholderlessSortedName = "walq_sorted_915d0de7008308e6"

// BenchmarkSortedAgainstPrevious runs this version's sorted functions and
// those of the release before (27399a9) side by side on one server
// (appendfsync everysec), each on a queue of its own, with the same
// arguments: per block, againstBlock values published one per call on
// half as many keys, then pulled 100 values a call and acked batch by
// batch, the two versions in turns, the first changing every block. It
// reports, per phase, the medians over b.N blocks of the FCALL time per
// value (INFO commandstats) of each version and of their ratio this ÷
// previous per block, and the same ratio of the server's CPU per value.
func BenchmarkSortedAgainstPrevious(b *testing.B) {
	srv := redistest.Start(b, "--appendonly", "yes", "--appendfsync", "everysec", "--maxmemory-policy", "noeviction")
	ctx := context.Background()
	rdb := srv.Client()
	require.NoError(b, rdb.FunctionLoad(ctx, placeholderlessSortedLibrary).Err())
	libs := map[string]string{"prev": placeholderlessSortedName, "this": sortedLibrary.name}
	qs := map[string]*Sorted[int64]{}
	for v := range libs {
		s, err := OpenSorted[int64](ctx, rdb, "sorted-against-"+v, &SortedOptions{Options: Options{TrustServer: true, ManualRequeue: true}})
		require.NoError(b, err)
		b.Cleanup(func() { _ = s.Close() })
		qs[v] = s
	}
	res := map[string][]float64{} // "<version> <phase> <cmd|cpu>" -> per block
	b.ResetTimer()
	for blk := 0; blk < b.N; blk++ {
		order := []string{"prev", "this"}
		if blk%2 == 1 {
			order[0], order[1] = order[1], order[0]
		}
		for _, v := range order {
			sortedCycleAgainst(b, qs[v], libs[v], blk, func(phase string, cmd, cpu float64) {
				res[v+" "+phase+" cmd"] = append(res[v+" "+phase+" cmd"], cmd)
				res[v+" "+phase+" cpu"] = append(res[v+" "+phase+" cpu"], cpu)
			})
		}
	}
	b.StopTimer()
	reportAgainst(b, res, "value")
}

// sortedCycleAgainst publishes againstBlock values on s through the
// library lib, then pulls and acks them, and hands each phase's FCALL
// time and server CPU per value to report.
func sortedCycleAgainst(b *testing.B, s *Sorted[int64], lib string, blk int, report func(phase string, cmd, cpu float64)) {
	ctx := context.Background()
	call := func(fn, op string, args ...any) any {
		now := time.Now()
		argv := append([]any{s.wake, unixMicros(now), s.o.MaxDeliveries, "0", span(now, s.o.AckTimeout), "1", op}, args...)
		v, err := s.rdb.FCall(ctx, lib+"_"+fn, s.keys, argv...).Result()
		require.NoError(b, err)
		return v
	}
	phase := func(name string, run func()) {
		cmd0, cpu0 := fcallTime(b, &Queue{handle: s.handle})
		run()
		cmd1, cpu1 := fcallTime(b, &Queue{handle: s.handle})
		report(name, (cmd1-cmd0)/againstBlock, (cpu1-cpu0)/againstBlock)
	}
	payload := make([]byte, 100)
	phase("publish", func() {
		for i := range againstBlock {
			part, err := sortPart(int64(blk*againstBlock + i))
			require.NoError(b, err)
			v, err := msgpack.Marshal(&sortedValue{Sort: part, At: time.Now().UnixNano(), Payload: payload})
			require.NoError(b, err)
			call("grow", "publish", fmt.Sprintf("key-%d-%d", blk, i/2), part, v)
		}
	})
	phase("pull+ack", func() {
		for pulled := 0; pulled < againstBlock; {
			args := []any{100, ""}
			for range 100 {
				args = append(args, strconv.FormatUint(newToken(), 10))
			}
			r, _ := call("grow", "pull", args...).([]any)
			got, _ := r[0].([]any)
			require.NotEmpty(b, got)
			for _, x := range got {
				batch, _ := x.([]any)
				vals, _ := batch[2].([]any)
				pulled += len(vals)
				require.EqualValues(b, 0, call("settle", "ack", batch[0]))
			}
		}
	})
}
