package redisq_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/redisq"
	"github.com/walq/walq/redisq/internal/redistest"
)

// openChildSorted opens the single-flight queue of the form ("sorted"
// or "windowed") named in a child's environment.
func openChildSorted(ctx context.Context, rdb redis.UniversalClient, form, name string) (*redisq.Sorted[time.Time], error) {
	so := redisq.SortedOptions{SingleFlight: true}
	if form == "windowed" {
		w, err := redisq.OpenWindowed(ctx, rdb, name, &redisq.WindowOptions{SortedOptions: so, Window: testWindow})
		if err != nil {
			return nil, err
		}
		return w.Sorted, nil
	}
	return redisq.OpenSorted[time.Time](ctx, rdb, name, &so)
}

// childSortedConsumer is the body of a child process on a sorted or
// windowed queue: it pulls, holds each batch a moment, acks it and
// prints "acked PAYLOAD" for each of its values, until its stdin closes.
// A batch it holds owns the key oracle:NAME:KEY of the server (SET NX,
// deleted before the ack is sent), a lock outside the queue: when a
// pulled batch finds the lock taken, its key was leased to two
// consumers at once, and it prints "split KEY".
func childSortedConsumer(form string) int {
	addr, name := os.Getenv("WALQ_REDISQ_ADDR"), os.Getenv("WALQ_REDISQ_QUEUE")
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		_, _ = bufio.NewReader(os.Stdin).ReadString('\n') // EOF when the parent is done
		cancel()
	}()
	s, err := openChildSorted(ctx, rdb, form, name)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer s.Close()
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	me := strconv.Itoa(os.Getpid())
	for {
		bs, err := s.Pull(ctx, 4)
		if ctx.Err() != nil {
			return 0
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 3
		}
		for _, b := range bs {
			if code := settleChild(ctx, rdb, out, name, me, b); code != 0 {
				return code
			}
		}
		out.Flush()
	}
}

// settleChild locks b's key in the oracle, holds the batch a moment,
// unlocks and acks it, printing what happened.
func settleChild(ctx context.Context, rdb *redis.Client, out *bufio.Writer, name, me string, b *queue.Batch[time.Time]) int {
	lock := "oracle:" + name + ":" + b.Key
	got, err := rdb.SetNX(ctx, lock, me, 0).Result()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 5
	}
	if !got {
		fmt.Fprintln(out, "split", b.Key)
	}
	time.Sleep(time.Millisecond) // holds the lease while the others pull
	if got {
		if err := rdb.Del(ctx, lock).Err(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 5
		}
	}
	err = b.Ack()
	if errors.Is(err, queue.ErrLeaseLost) {
		return 0 // the lease ran out first: the values went to another consumer, which acks them
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 4
	}
	for _, v := range b.Values {
		fmt.Fprintln(out, "acked", string(v.Payload))
	}
	return 0
}

// TestSortedManyProcesses runs three consumer processes competing on
// one single-flight sorted (and one windowed) queue while this process
// publishes over few keys: every value is acked exactly once, no key's
// batch is held by two processes at once, and more than one process
// acked.
func TestSortedManyProcesses(t *testing.T) {
	for _, f := range sortedForms {
		t.Run(f.name, func(t *testing.T) {
			srv := redistest.Start(t)
			rdb := srv.Client()
			ctx := context.Background()
			s, publish := f.open(t, rdb, "procs", redisq.Options{})
			defer s.Close()
			const children, values = 3, 1500
			lines := make(chan string, 4*values)
			var ends []func() error
			for range children {
				ends = append(ends, startSortedChild(t, f.name, srv.Addr, "procs", lines))
			}
			var wg sync.WaitGroup
			for p := range 3 {
				wg.Go(func() {
					for n := p; n < values; n += 3 {
						require.NoError(t, publish(ctx, int64(n), fmt.Sprint("k", n%6), []byte(fmt.Sprint("v", n))))
					}
				})
			}
			wg.Wait()
			acked, by := map[string]int{}, map[string]bool{}
			var splits []string
			deadline := time.After(30 * time.Second)
			for len(acked) < values {
				select {
				case l := <-lines:
					who, what, _ := strings.Cut(l, " ")
					verb, arg, _ := strings.Cut(what, " ")
					if verb == "split" {
						splits = append(splits, arg)
						continue
					}
					acked[arg]++
					by[who] = true
				case <-deadline:
					require.FailNow(t, "not every value acked", "%d of %d", len(acked), values)
				}
			}
			for _, end := range ends {
				require.NoError(t, end())
			}
			for len(lines) > 0 {
				l := <-lines
				_, what, _ := strings.Cut(l, " ")
				verb, arg, _ := strings.Cut(what, " ")
				if verb == "split" {
					splits = append(splits, arg)
				} else {
					acked[arg]++
				}
			}
			require.Empty(t, splits, "keys whose batches two processes held at once")
			require.Len(t, acked, values)
			for p, n := range acked {
				require.Equal(t, 1, n, "value %s acked %d times", p, n)
			}
			require.Greater(t, len(by), 1, "the processes competed: more than one of them acked values")
			st, err := s.StatsContext(ctx)
			require.NoError(t, err)
			require.Zero(t, st.SortedPending+st.SortedBatches)
		})
	}
}

// startSortedChild starts a consumer process on the queue of the form,
// sending its output lines to lines prefixed with its pid, and returns
// the function that stops it (closing its stdin) and waits for it and
// its output.
func startSortedChild(t *testing.T, form, addr, name string, lines chan<- string) func() error {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "WALQ_REDISQ_CHILD="+form, "WALQ_REDISQ_ADDR="+addr, "WALQ_REDISQ_QUEUE="+name)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	done := make(chan struct{})
	pid := strconv.Itoa(cmd.Process.Pid)
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- pid + " " + sc.Text()
		}
	}()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	return func() error {
		if err := stdin.Close(); err != nil {
			return err
		}
		<-done
		return cmd.Wait()
	}
}
