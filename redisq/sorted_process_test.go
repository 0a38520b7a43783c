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
// or "windowed") named in a child's environment, with the lease o
// gives.
func openChildSorted(ctx context.Context, rdb redis.UniversalClient, form, name string, o redisq.Options) (*redisq.Sorted[time.Time], error) {
	so := redisq.SortedOptions{Options: o, SingleFlight: true}
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
// A batch it holds owns the key oracle:NAME:KEY of the server (SET NX
// for half the lease, so that a killed child's lock is gone before its
// lease runs out; deleted before the ack is sent), a lock outside the
// queue: when a pulled batch finds the lock taken, its key was leased
// to two consumers at once, and it prints "split KEY".
func childSortedConsumer(form string) int {
	addr, name := os.Getenv("WALQ_REDISQ_ADDR"), os.Getenv("WALQ_REDISQ_QUEUE")
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer rdb.Close()
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		_, _ = bufio.NewReader(os.Stdin).ReadString('\n') // EOF when the parent is done
		cancel()
	}()
	o := redisq.Options{AckTimeout: 10 * time.Second}
	if d, err := time.ParseDuration(os.Getenv("WALQ_REDISQ_ACK_TIMEOUT")); err == nil {
		o.AckTimeout = d
	}
	s, err := openChildSorted(ctx, rdb, form, name, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer s.Close()
	c := &sortedChild{rdb: rdb, out: bufio.NewWriter(os.Stdout), name: name, me: strconv.Itoa(os.Getpid()), hold: o.AckTimeout / 2}
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
			if err := c.settle(ctx, b); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 4
			}
		}
	}
}

// sortedChild is a child consumer's oracle lock and output.
type sortedChild struct {
	rdb  *redis.Client
	out  *bufio.Writer
	name string        // the queue's
	me   string        // the lock's value: the pid
	hold time.Duration // the lock's lifetime
}

// settle locks b's key in the oracle, holds the batch a moment, unlocks
// and acks it, and prints (and flushes) what happened.
func (c *sortedChild) settle(ctx context.Context, b *queue.Batch[time.Time]) error {
	defer c.out.Flush()
	lock := "oracle:" + c.name + ":" + b.Key
	got, err := c.rdb.SetNX(ctx, lock, c.me, c.hold).Result()
	if err != nil {
		return err
	}
	if !got {
		fmt.Fprintln(c.out, "split", b.Key)
	}
	time.Sleep(time.Millisecond) // holds the lease while the others pull
	if got {
		if err := c.rdb.Del(ctx, lock).Err(); err != nil {
			return err
		}
	}
	err = b.Ack()
	if errors.Is(err, queue.ErrLeaseLost) {
		return nil // the lease ran out first: the values went to another consumer, which acks them
	}
	if err != nil {
		return err
	}
	for _, v := range b.Values {
		fmt.Fprintln(c.out, "acked", string(v.Payload))
	}
	return nil
}

// TestSortedManyProcesses runs three consumer processes competing on
// one single-flight sorted (and one windowed) queue while this process
// publishes over few keys: no key's batch is held by two processes at
// once, every value is acked, none twice, and more than one process
// acked.
func TestSortedManyProcesses(t *testing.T) {
	for _, f := range sortedForms {
		t.Run(f.name, func(t *testing.T) { runSortedChildren(t, f, false) })
	}
}

// TestSortedConsumerProcessKilled is TestSortedManyProcesses with one
// of the processes killed (SIGKILL) mid-traffic: its batches come back
// when their leases run out and go to the others, no key is held twice
// at once, and the values it acked and did not print yet are at most
// those of one batch.
func TestSortedConsumerProcessKilled(t *testing.T) {
	for _, f := range sortedForms {
		t.Run(f.name, func(t *testing.T) { runSortedChildren(t, f, true) })
	}
}

// runSortedChildren runs TestSortedManyProcesses on the form f, killing
// one child when kill.
func runSortedChildren(t *testing.T, f sortedForm, kill bool) {
	srv := redistest.Start(t)
	ctx := context.Background()
	s, publish := f.open(t, srv.Client(), "procs", redisq.Options{})
	defer s.Close()
	const children, values = 3, 1200
	env := []string{"WALQ_REDISQ_CHILD=" + f.name, "WALQ_REDISQ_ADDR=" + srv.Addr, "WALQ_REDISQ_QUEUE=procs"}
	if kill {
		env = append(env, "WALQ_REDISQ_ACK_TIMEOUT=1s")
	}
	lines := make(chan string, 4*values)
	var cs []*sortedChildProc
	for range children {
		cs = append(cs, startSortedChild(t, env, lines))
	}
	var wg sync.WaitGroup
	for p := range 3 {
		wg.Go(func() {
			for n := p; n < values; n += 3 {
				require.NoError(t, publish(ctx, int64(n), keyOf(fmt.Sprint("v", n)), []byte(fmt.Sprint("v", n))))
				if kill && n == values/3 {
					require.NoError(t, cs[0].cmd.Process.Kill())
				}
			}
		})
	}
	wg.Wait()
	require.Eventually(t, func() bool {
		st, err := s.StatsContext(ctx)
		return err == nil && st.SortedPending+st.SortedBatches == 0
	}, 30*time.Second, 20*time.Millisecond, "every value acked")
	for i, c := range cs {
		if kill && i == 0 {
			_ = c.cmd.Wait()
			<-c.done
			continue
		}
		require.NoError(t, c.end())
	}
	close(lines)
	acked, by := map[string]int{}, map[string]bool{}
	var splits []string
	for l := range lines {
		who, what, _ := strings.Cut(l, " ")
		verb, arg, _ := strings.Cut(what, " ")
		if verb == "split" {
			splits = append(splits, arg)
			continue
		}
		acked[arg]++
		by[who] = true
	}
	require.Empty(t, splits, "keys whose batches two processes held at once")
	for p, n := range acked {
		require.Equal(t, 1, n, "value %s acked %d times", p, n)
	}
	unseen := map[string]bool{} // keys of values acked and not printed: the killed child's last batch
	for n := range values {
		if p := fmt.Sprint("v", n); acked[p] == 0 {
			unseen[keyOf(p)] = true
		}
	}
	if kill {
		require.LessOrEqual(t, len(unseen), 1, "values acked by no one, or by the killed child before its last batch")
	} else {
		require.Empty(t, unseen, "values not acked")
	}
	require.Greater(t, len(by), 1, "the processes competed: more than one of them acked values")
	st, err := s.StatsContext(ctx)
	require.NoError(t, err)
	require.Zero(t, st.SortedDead)
}

// sortedChildProc is a running child consumer.
type sortedChildProc struct {
	cmd   *exec.Cmd
	stdin interface{ Close() error }
	done  chan struct{} // closed when its output has been read
}

// startSortedChild starts a consumer process with the environment env,
// sending its output lines to lines prefixed with its pid.
func startSortedChild(t *testing.T, env []string, lines chan<- string) *sortedChildProc {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	c := &sortedChildProc{cmd: cmd, stdin: stdin, done: make(chan struct{})}
	pid := strconv.Itoa(cmd.Process.Pid)
	go func() {
		defer close(c.done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- pid + " " + sc.Text()
		}
	}()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	return c
}

// end stops the child (closing its stdin) and waits for it and its
// output.
func (c *sortedChildProc) end() error {
	if err := c.stdin.Close(); err != nil {
		return err
	}
	<-c.done
	return c.cmd.Wait()
}
