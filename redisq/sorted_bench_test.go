package redisq_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/walq/walq/redisq"
)

// BenchmarkSortedScripts profiles the sorted queue's calls one at a time
// (appendfsync everysec): b.N values published on b.N/2 keys, then
// pulled 100 values at a time and acked batch by batch. It reports each
// phase's FCALL time per value (commandstats) and the server's CPU per
// value, and logs the other commands each phase ran per value.
func BenchmarkSortedScripts(b *testing.B) {
	srv := server(b, "everysec")
	ctx := context.Background()
	s, err := redisq.OpenSorted[int64](ctx, srv.Client(), "bench-sorted", &redisq.SortedOptions{Options: redisq.Options{TrustServer: true}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	payload := make([]byte, 100)
	keys := make([]string, (b.N+1)/2)
	for i := range keys {
		keys[i] = "key-" + strconv.Itoa(i)
	}
	pulled := 0
	phases := []struct {
		name string
		run  func() error
	}{
		{"publish", func() error {
			for i := range b.N {
				if err := s.Publish(ctx, int64(i), keys[i/2], payload); err != nil {
					return err
				}
			}
			return nil
		}},
		{"pull+ack", func() error {
			for pulled < b.N {
				bs, err := s.TryPull(100)
				if err != nil {
					return err
				}
				for _, bt := range bs {
					pulled += len(bt.Values)
					if err := bt.Ack(); err != nil {
						return err
					}
				}
			}
			return nil
		}},
	}
	b.ResetTimer()
	for _, p := range phases {
		cpu := resetStats(b, srv)
		if err := p.run(); err != nil {
			b.Fatal(err)
		}
		cpu = serverCPU(b, srv) - cpu
		st := commandStats(b, srv)
		b.ReportMetric(scripts(st).usec/float64(b.N), p.name+"-µs/value")
		b.ReportMetric(cpu*1e6/float64(b.N), p.name+"-cpu-µs/value")
		b.Logf("%s: %.0f script calls; other commands, calls and µs per value: %s",
			p.name, scripts(st).calls, nestedStats(st, b.N))
	}
}
