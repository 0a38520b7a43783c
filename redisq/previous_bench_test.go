package redisq

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/redisq/internal/redistest"
)

// BenchmarkAgainstPrevious runs this version's functions and those of the
// previous one (36684de, testdata/library-36684de.lua) side by side on one
// server (appendfsync everysec), each on a queue of its own, with the
// arguments the client sends: per block, 150 messages enqueued, leased and
// acked one per call, then three per call (gathered Enqueues, Dequeues
// and Acks), the two versions in turns, the first changing every block.
// Both versions see the same load, so the paired figures hold on a busy
// machine where the cycle benchmarks swing. It reports, per phase, the
// medians over b.N blocks of the FCALL time per message (INFO
// commandstats) of each version and of their ratio this ÷ previous per
// block, and the same ratio of the server's CPU per message.
func BenchmarkAgainstPrevious(b *testing.B) {
	srv := redistest.Start(b, "--appendonly", "yes", "--appendfsync", "everysec", "--maxmemory-policy", "noeviction")
	ctx := context.Background()
	rdb := srv.Client()
	require.NoError(b, rdb.FunctionLoad(ctx, previousLibrary).Err())
	libs := map[string]string{"prev": previousName, "this": library.name}
	qs := map[string]*Queue{}
	for v := range libs {
		q, err := Open(ctx, rdb, "against-"+v, &Options{TrustServer: true})
		require.NoError(b, err)
		b.Cleanup(func() { _ = q.Close() })
		qs[v] = q
	}
	res := map[string][]float64{} // "<version> <phase> <cmd|cpu>" -> per block
	b.ResetTimer()
	for blk := 0; blk < b.N; blk++ {
		order := []string{"prev", "this"}
		if blk%2 == 1 {
			order[0], order[1] = order[1], order[0]
		}
		for _, per := range []int{1, 3} {
			for _, v := range order {
				cycleAgainst(b, qs[v], libs[v], per, func(phase string, cmd, cpu float64) {
					res[v+" "+phase+" cmd"] = append(res[v+" "+phase+" cmd"], cmd)
					res[v+" "+phase+" cpu"] = append(res[v+" "+phase+" cpu"], cpu)
				})
			}
		}
	}
	b.StopTimer()
	reportAgainst(b, res, "msg")
}

// reportAgainst reports what a benchmark against the previous library
// measured, res ("<version> <phase> <cmd|cpu>" -> one figure per block):
// for each phase the median of this ÷ prev over the blocks, and each
// version's median FCALL time in µs per what (a message, a value).
func reportAgainst(b *testing.B, res map[string][]float64, what string) {
	for k, prev := range res {
		phase, ok := strings.CutPrefix(k, "prev ")
		if !ok {
			continue
		}
		this := res["this "+phase]
		ratios := make([]float64, len(prev))
		for i := range prev {
			ratios[i] = this[i] / prev[i]
		}
		unit := strings.ReplaceAll(phase, " ", "-")
		if strings.HasSuffix(phase, " cmd") {
			b.ReportMetric(median(prev), unit+"-prev-µs/"+what)
			b.ReportMetric(median(this), unit+"-this-µs/"+what)
		}
		b.ReportMetric(median(ratios), unit+"-this/prev")
	}
}

const againstBlock = 150 // messages per version, phase and block

// cycleAgainst enqueues, leases and acks againstBlock messages on q through
// the library lib, per messages per call, and hands each phase's FCALL
// time and server CPU per message to report. This version's library is
// called as the handle calls it (its lone calls go to the functions
// made for them); the previous one with that version's arguments.
func cycleAgainst(b *testing.B, q *Queue, lib string, per int, report func(phase string, cmd, cpu float64)) {
	ctx := context.Background()
	call := func(op string, args ...any) any {
		argv := append([]any{q.wake, unixMicros(q.o.Clock.Now()), q.o.MaxDeliveries, micros(q.o.DedupWindow)}, args...)
		v, err := q.rdb.FCall(ctx, lib+"_"+op, q.keys, argv...).Result()
		require.NoError(b, err)
		return v
	}
	phase := func(name string, run func()) {
		cmd0, cpu0 := fcallTime(b, q)
		run()
		cmd1, cpu1 := fcallTime(b, q)
		report(fmt.Sprintf("x%d %s", per, name), (cmd1-cmd0)/againstBlock, (cpu1-cpu0)/againstBlock)
	}
	body := make([]byte, 100)
	this := lib == library.name // this version's calls, as the handle makes them
	phase("enqueue", func() {
		for i := 0; i < againstBlock; i += per {
			args := []any{"each", per}
			if per == 1 {
				args[0] = "all" // a lone Enqueue
			}
			for range per {
				a, err := q.itemArgs(q.o.Clock.Now(), &queue.Item{Payload: body})
				require.NoError(b, err)
				args = append(args, a[:]...)
			}
			if this {
				_, err := q.enqueue(ctx, q.o.Clock.Now(), args[0].(string), args[2:]...)
				require.NoError(b, err)
				continue
			}
			call("enqueue", args...)
		}
	})
	var receipts []queue.Receipt
	phase("dequeue", func() {
		for i := 0; i < againstBlock; i += per {
			if this {
				ms, _, err := q.lease(ctx, per, false)
				require.NoError(b, err)
				require.Len(b, ms, per)
				for _, m := range ms {
					receipts = append(receipts, m.Receipt)
				}
				continue
			}
			args := []any{micros(q.o.AckTimeout), per}
			for range per {
				args = append(args, strconv.FormatUint(newToken(), 10))
			}
			got, _ := call("dequeue", args...).([]any)
			require.Len(b, got, 1+3*per)
			for j := range per {
				tok, _ := strconv.ParseUint(args[2+j].(string), 10, 64)
				receipts = append(receipts, queue.Receipt{Seq: uint64(toInt(got[1+3*j])), Lease: tok})
			}
		}
	})
	phase("ack", func() {
		for i := 0; i < len(receipts); i += per {
			if this {
				for _, err := range q.settle("ack", "", receipts[i:i+per]) {
					require.NoError(b, err)
				}
				continue
			}
			args := []any{"ack", "", "r"}
			for _, r := range receipts[i : i+per] {
				args = append(args, strconv.FormatUint(r.Seq, 10), strconv.FormatUint(r.Lease, 10))
			}
			call("settle", args...)
		}
	})
}

// fcallTime returns the server's time in FCALL so far (INFO commandstats)
// and its CPU (used_cpu_user + used_cpu_sys), in µs.
func fcallTime(b *testing.B, q *Queue) (cmd, cpu float64) {
	info, err := q.rdb.Info(context.Background(), "commandstats", "cpu").Result()
	require.NoError(b, err)
	for _, line := range strings.Split(info, "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		switch k {
		case "cmdstat_fcall":
			for _, kv := range strings.Split(v, ",") {
				if us, ok := strings.CutPrefix(kv, "usec="); ok {
					cmd, _ = strconv.ParseFloat(us, 64)
				}
			}
		case "used_cpu_user", "used_cpu_sys":
			s, _ := strconv.ParseFloat(v, 64)
			cpu += s * 1e6
		}
	}
	return cmd, cpu
}

func median(x []float64) float64 {
	y := append([]float64(nil), x...)
	sort.Float64s(y)
	return y[len(y)/2]
}
