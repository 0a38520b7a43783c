package redisq

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/redisq/internal/redistest"
)

// errInjected is the failure fcallFaults gives the calls it picks.
var errInjected = errors.New("injected connection failure")

// fcallFaults is a client hook that fails the FCALLs fail picks, unsent,
// as a dropped connection or an ended context would; seen is told of
// every FCALL sent and whether it succeeded. Both get the function's
// name and the call's arguments.
type fcallFaults struct {
	redistest.Hook
	mu   sync.Mutex
	fail func(fn string, args []any) bool
	seen func(fn string, args []any, err error)
}

func (f *fcallFaults) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		fn, args, ok := fcallFunc(cmd)
		if !ok {
			return next(ctx, cmd)
		}
		f.mu.Lock()
		fail := f.fail != nil && f.fail(fn, args)
		f.mu.Unlock()
		if fail {
			cmd.SetErr(errInjected)
			return errInjected
		}
		err := next(ctx, cmd)
		f.mu.Lock()
		if f.seen != nil {
			f.seen(fn, args, err)
		}
		f.mu.Unlock()
		return err
	}
}

// isCall tells whether the FCALL of fn with args is the library
// function op (its name's last part) carrying the argument arg.
func isCall(fn string, args []any, op, arg string) bool {
	if !strings.HasSuffix(fn, "_"+op) {
		return false
	}
	for _, a := range args[2:] {
		if fmt.Sprint(a) == arg {
			return true
		}
	}
	return false
}

// TestLeaseKeepsLeased: a dequeue that leased messages returns them even
// when a later call of the same dequeue fails (the refill after a message
// whose body does not decode was dead-lettered, or that dead-lettering
// itself): the server holds them leased, and dropped they would reach no
// consumer before their lease ran out, their delivery already counted.
// In a gathered dequeue the callers left without a message get the
// error, not "nothing ready".
func TestLeaseKeepsLeased(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	failures := []struct {
		name string
		hook func() *fcallFaults
		// ready, in flight, dead after the dequeue
		stats [3]int64
	}{
		{"refill fails", func() *fcallFaults {
			buried := false
			return &fcallFaults{
				fail: func(fn string, args []any) bool {
					return buried && (strings.HasSuffix(fn, "_dequeue") || strings.HasSuffix(fn, "_lease1"))
				},
				seen: func(fn string, args []any, err error) {
					buried = buried || (err == nil && isCall(fn, args, "settle", "corrupt"))
				},
			}
		}, [3]int64{1, 2, 1}},
		{"dead-lettering fails", func() *fcallFaults {
			return &fcallFaults{fail: func(fn string, args []any) bool { return isCall(fn, args, "settle", "corrupt") }}
		}, [3]int64{1, 3, 0}},
	}
	takes := []struct {
		name string
		take func(t *testing.T, q *Queue) []*queue.Message
	}{
		{"batch", func(t *testing.T, q *Queue) []*queue.Message {
			ms, err := q.DequeueBatch(ctx, 3)
			require.NoError(t, err, "messages were leased: they are returned, not an error")
			return ms
		}},
		{"gathered", func(t *testing.T, q *Queue) []*queue.Message {
			reqs := []*leaseReq{{p: newPresence(ctx)}, {p: newPresence(ctx)}, {p: newPresence(ctx)}}
			errs := q.leaseEach(reqs)
			var out []*queue.Message
			for i, r := range reqs {
				if r.m != nil {
					require.NoError(t, errs[i])
					out = append(out, r.m)
				}
			}
			require.Nil(t, reqs[2].m)
			require.ErrorIs(t, errs[2], errInjected, "a caller left without a message gets the error")
			return out
		}},
	}
	for _, f := range failures {
		for _, tk := range takes {
			t.Run(f.name+"/"+tk.name, func(t *testing.T) {
				rdb := srv.Client()
				q, err := Open(ctx, rdb, "keeps-"+strings.ReplaceAll(f.name, " ", "-")+"-"+tk.name, nil)
				require.NoError(t, err)
				defer q.Close()
				_, err = q.EnqueueBatch(ctx, []queue.Item{{Payload: []byte("a")}, {Payload: []byte("b")}, {Payload: []byte("c")}, {Payload: []byte("d")}})
				require.NoError(t, err)
				require.NoError(t, rdb.HSet(ctx, q.keys[1], "b2", "\xc1").Err())
				rdb.AddHook(f.hook())

				ms := tk.take(t, q)
				var got []string
				for _, m := range ms {
					got = append(got, string(m.Payload))
				}
				sort.Strings(got)
				require.Equal(t, []string{"a", "c"}, got)
				s := q.Stats()
				require.Equal(t, f.stats, [3]int64{s.Ready, s.InFlight, s.Dead})
				for _, m := range ms {
					require.NoError(t, m.Ack())
				}
			})
		}
	}
}

// TestSortedPullKeepsLeased is TestLeaseKeepsLeased for a sorted queue: a
// Pull past the 1000 batches of one call whose later call fails (its ctx
// ends between the calls, or the connection drops) returns the batches
// the earlier call leased with a nil error, since a caller drops what
// comes with an error and the values would go unseen until their lease
// ran out, their delivery counted (dead, under MaxDeliveries 1). The next
// Pull reports the failure, and every value is pulled once.
func TestSortedPullKeepsLeased(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		cancel bool  // the Pull's ctx ends after its first call, else later calls fail
		want   error // what the next Pull reports
	}{
		{"ctx ends", true, context.Canceled},
		{"call fails", false, errInjected},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rdb := srv.Client()
			// A call that leases 1000 batches may take seconds on a loaded
			// machine: OpTimeout must not end it, the hook's failure does.
			s, err := OpenSorted[int64](ctx, rdb, "keeps-"+strings.ReplaceAll(tc.name, " ", "-"),
				&SortedOptions{Options: Options{ManualRequeue: true, MaxDeliveries: 1, OpTimeout: time.Minute}})
			require.NoError(t, err)
			defer s.Close()
			const keys = 1500
			for i := range keys {
				require.NoError(t, s.Publish(ctx, int64(i), fmt.Sprintf("k%05d", i), []byte{1}))
			}
			pctx, cancel := context.WithCancel(ctx)
			defer cancel()
			pulls, failing := 0, true // under the hook's mu
			hook := &fcallFaults{
				fail: func(fn string, args []any) bool {
					return !tc.cancel && failing && pulls > 0 && isCall(fn, args, "grow", "pull")
				},
				seen: func(fn string, args []any, err error) {
					if err == nil && isCall(fn, args, "grow", "pull") {
						pulls++
						if tc.cancel {
							cancel()
						}
					}
				},
			}
			rdb.AddHook(hook)

			bs, err := s.Pull(pctx, math.MaxInt)
			require.NoError(t, err, "batches were leased: they are returned, not an error")
			require.Len(t, bs, pullTokens)
			_, err = s.Pull(pctx, math.MaxInt)
			require.ErrorIs(t, err, tc.want, "the next Pull reports the failure")
			hook.mu.Lock()
			failing = false
			hook.mu.Unlock()
			rest, err := s.TryPull(math.MaxInt)
			require.NoError(t, err)
			seen := map[string]bool{}
			for _, b := range append(bs, rest...) {
				require.False(t, seen[b.Key], "%s pulled twice", b.Key)
				seen[b.Key] = true
				require.NoError(t, b.Ack())
			}
			require.Len(t, seen, keys)
			st := s.Stats()
			require.Zero(t, st.SortedPending+st.SortedBatches+st.SortedDead)
		})
	}
}

// TestSortedPullKeepsDecoded: a pull whose dead-lettering of a batch that
// does not decode fails still returns the other batches it leased.
func TestSortedPullKeepsDecoded(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	s, err := OpenSorted[int64](ctx, rdb, "keeps-sorted", &SortedOptions{Options: Options{ManualRequeue: true}})
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.Publish(ctx, 1, "k1", []byte("a")))
	require.NoError(t, s.Publish(ctx, 2, "k2", []byte("b")))
	require.NoError(t, rdb.HSet(ctx, s.keys[1], "1", "\xc1").Err())
	rdb.AddHook(&fcallFaults{fail: func(fn string, args []any) bool { return isCall(fn, args, "settle", "dead") }})

	bs, err := s.TryPull(10)
	require.NoError(t, err, "a batch was leased: it is returned, not an error")
	require.Len(t, bs, 1)
	require.Equal(t, "k2", bs[0].Key)
	require.NoError(t, bs[0].Ack())
	st := s.Stats()
	require.Equal(t, [2]int{1, 0}, [2]int{st.SortedBatches, st.SortedDead}, "k1's batch stays leased until its lease runs out")
}
