package redisq_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/redisq"
	"github.com/walq/walq/redisq/internal/redistest"
)

// childConsumer is the body of a child process: it dequeues and acks from
// the queue named in its environment, printing each acked id, until its
// stdin closes.
func childConsumer() int {
	addr, name := os.Getenv("WALQ_REDISQ_ADDR"), os.Getenv("WALQ_REDISQ_QUEUE")
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer rdb.Close()
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		_, _ = bufio.NewReader(os.Stdin).ReadString('\n') // EOF when the parent is done
		cancel()
	}()
	ackTimeout := 10 * time.Second
	if d, err := time.ParseDuration(os.Getenv("WALQ_REDISQ_ACK_TIMEOUT")); err == nil {
		ackTimeout = d
	}
	q, err := redisq.Open(ctx, rdb, name, &redisq.Options{AckTimeout: ackTimeout})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer q.Close()
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	for {
		ms, err := q.DequeueBatch(ctx, 8)
		if ctx.Err() != nil {
			return 0
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 3
		}
		for _, m := range ms {
			err := m.Ack()
			if errors.Is(err, queue.ErrLeaseLost) {
				// The lease ran out first (a short AckTimeout on a busy
				// machine): the message went to another consumer, which
				// acks it; this one must not count it.
				continue
			}
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 4
			}
			fmt.Fprintln(out, m.ID)
		}
		out.Flush()
	}
}

// TestManyProcesses runs three consumer processes competing on one queue
// while this process enqueues: every message is acked exactly once.
func TestManyProcesses(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	q, err := redisq.Open(ctx, rdb, "procs", nil)
	require.NoError(t, err)
	defer q.Close()

	const children, messages = 3, 3000
	type child struct {
		cmd   *exec.Cmd
		stdin interface{ Close() error }
		ids   chan []string
	}
	var cs []child
	for range children {
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), "WALQ_REDISQ_CHILD=1", "WALQ_REDISQ_ADDR="+srv.Addr, "WALQ_REDISQ_QUEUE=procs")
		cmd.Stderr = os.Stderr
		stdin, err := cmd.StdinPipe()
		require.NoError(t, err)
		stdout, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		c := child{cmd: cmd, stdin: stdin, ids: make(chan []string, 1)}
		go func() {
			var ids []string
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				ids = append(ids, sc.Text())
			}
			c.ids <- ids
		}()
		cs = append(cs, c)
	}
	for i := 0; i < messages; i += 100 {
		items := make([]queue.Item, 0, 100)
		for j := i; j < i+100; j++ {
			items = append(items, queue.Item{ID: fmt.Sprint("m", j), Payload: []byte("x")})
		}
		_, err := q.EnqueueBatch(ctx, items)
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return q.Stats().Acked == messages }, 60*time.Second, 20*time.Millisecond)
	seen := map[string]int{}
	busy := 0
	for _, c := range cs {
		require.NoError(t, c.stdin.Close())
		ids := <-c.ids
		require.NoError(t, c.cmd.Wait())
		if len(ids) > 0 {
			busy++
		}
		for _, id := range ids {
			seen[id]++
		}
	}
	require.Len(t, seen, messages)
	for id, n := range seen {
		require.Equal(t, 1, n, "message %s acked %d times", id, n)
	}
	require.Greater(t, busy, 1, "the processes competed: more than one of them acked messages")
}

// TestConsumerProcessKilled kills (SIGKILL) one of three consumer
// processes mid-traffic: the messages it held come back when their leases
// run out, every message is acked, and none twice (the server counts
// every ack that succeeded).
func TestConsumerProcessKilled(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	q, err := redisq.Open(ctx, srv.Client(), "killed", nil)
	require.NoError(t, err)
	defer q.Close()
	const messages = 3000
	var victim *exec.Cmd
	var stdins []interface{ Close() error }
	var cmds []*exec.Cmd
	printed := make(chan string, messages*2)
	for i := range 3 {
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), "WALQ_REDISQ_CHILD=1", "WALQ_REDISQ_ADDR="+srv.Addr,
			"WALQ_REDISQ_QUEUE=killed", "WALQ_REDISQ_ACK_TIMEOUT=1s")
		cmd.Stderr = os.Stderr
		stdin, err := cmd.StdinPipe()
		require.NoError(t, err)
		stdout, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		go func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				printed <- sc.Text()
			}
		}()
		if i == 0 {
			victim = cmd
		} else {
			stdins, cmds = append(stdins, stdin), append(cmds, cmd)
		}
	}
	for i := 0; i < messages; i += 100 {
		items := make([]queue.Item, 0, 100)
		for j := i; j < i+100; j++ {
			items = append(items, queue.Item{Payload: []byte("x")})
		}
		_, err := q.EnqueueBatch(ctx, items)
		require.NoError(t, err)
		if i == messages/3 {
			require.NoError(t, victim.Process.Kill())
			_ = victim.Wait()
		}
	}
	require.Eventually(t, func() bool {
		s := q.Stats()
		return s.Ready+s.InFlight+s.Delayed == 0 && s.Acked >= messages
	}, 60*time.Second, 50*time.Millisecond)
	for _, in := range stdins {
		require.NoError(t, in.Close())
	}
	for _, c := range cmds {
		require.NoError(t, c.Wait())
	}
	s := q.Stats()
	t.Logf("leases that ran out (the killed process's): %d", s.Expired)
	require.Equal(t, uint64(messages), s.Acked, "every message acked exactly once")
	require.Zero(t, s.Dead)
	seen := map[string]bool{}
	for len(printed) > 0 {
		id := <-printed
		require.False(t, seen[id], "message %s acked twice", id)
		seen[id] = true
	}
}
