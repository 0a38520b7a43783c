package redisq

import (
	"context"
	"fmt"
	"math/rand"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/redisq/internal/redistest"
)

// diffDead is what both engines list of a dead value alike.
type diffDead struct {
	Key, Reason, Payload string
	Sort                 int64
	Deliveries           int
}

// TestSortedDeadDifferential: random publishes, pulls, acks, nacks, dead
// letters, requeues and purges of dead values give the same batches, dead
// sets and Stats on both engines, with and without single flight.
func TestSortedDeadDifferential(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	for seed := int64(1); seed <= 6; seed++ {
		single := seed%2 == 0
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rnd := rand.New(rand.NewSource(seed))
			r, err := OpenSorted[int64](ctx, srv.Client(), fmt.Sprint("diff-", seed), &SortedOptions{SingleFlight: single, Options: Options{ManualRequeue: true, MaxDeliveries: 3}})
			require.NoError(t, err)
			defer r.Close()
			e, err := queue.OpenSorted[int64](t.TempDir(), &queue.SortedOptions{SingleFlight: single, Options: queue.Options{ManualRequeue: true, MaxDeliveries: 3}})
			require.NoError(t, err)
			defer e.Close()
			qs := []queue.SortedQueue[int64]{e, r}
			var out [2][]*queue.Batch[int64]
			acted := map[int]int{}
			dead := func(i int) []queue.DeadValue[int64] {
				ds, err := qs[i].DeadValues(0, 0)
				require.NoError(t, err)
				return ds
			}
			for step := 0; step < 300; step++ {
				op := rnd.Intn(10)
				var log [2]string
				for i, q := range qs {
					rs := rand.New(rand.NewSource(seed*1000 + int64(step)))
					switch op {
					case 0, 1, 2:
						k := fmt.Sprint("k", rs.Intn(5))
						require.NoError(t, q.Publish(ctx, int64(rs.Intn(20)), k, []byte(fmt.Sprint("p", step))))
					case 3:
						bs, err := q.TryPull(1 + rs.Intn(6))
						if err != nil {
							log[i] = err.Error()
						}
						for _, b := range bs {
							log[i] += fmt.Sprint(b.Key, "|")
							for _, v := range b.Values {
								log[i] += fmt.Sprint(v.Sort, ":", string(v.Payload), ":", v.Deliveries, ",")
							}
						}
						out[i] = append(out[i], bs...)
					case 4, 5:
						if len(out[i]) == 0 {
							continue
						}
						j := rs.Intn(len(out[i]))
						b := out[i][j]
						out[i] = append(out[i][:j], out[i][j+1:]...)
						switch rs.Intn(3) {
						case 0:
							log[i] = fmt.Sprint(b.Ack())
						case 1:
							log[i] = fmt.Sprint(b.Nack(0))
						case 2:
							log[i] = fmt.Sprint(b.DeadLetter(fmt.Sprint("why", step)))
						}
					case 6, 7:
						ds := dead(i)
						if len(ds) == 0 {
							continue
						}
						d := ds[rs.Intn(len(ds))]
						if rs.Intn(2) == 0 {
							log[i] = fmt.Sprint(q.RequeueDeadValue(d))
						} else {
							log[i] = fmt.Sprint(q.PurgeDeadValue(d))
						}
					case 8:
						if rs.Intn(3) == 0 {
							n, err := q.PurgeAllDead()
							log[i] = fmt.Sprint(n, err)
						} else {
							n, err := q.RequeueAllDead()
							log[i] = fmt.Sprint(n, err)
						}
					case 9:
						ds := dead(i)
						if len(ds) == 0 {
							continue
						}
						log[i] = fmt.Sprint(q.RequeueDead(ds[rs.Intn(len(ds))].Seq))
					}
				}
				require.Equal(t, log[0], log[1], "step %d op %d", step, op)
				if log[1] == "<nil>" || (op == 8 && log[1] != "0<nil>") {
					acted[op]++
				}
				var ds [2][]diffDead
				for i := range qs {
					for _, d := range dead(i) {
						ds[i] = append(ds[i], diffDead{d.Key, d.Reason, string(d.Payload), d.Sort, d.Deliveries})
					}
				}
				require.Equal(t, ds[0], ds[1], "dead set after step %d op %d", step, op)
				require.Equal(t, sortedCounts(e.Stats()), sortedCounts(r.Stats()), "stats after step %d op %d", step, op)
			}
			t.Logf("acted %v, final %v", acted, sortedCounts(r.Stats()))
		})
	}
}
