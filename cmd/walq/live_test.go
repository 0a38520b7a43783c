package main_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
)

// holderEnv makes the test binary a process that holds a queue open and
// writes to it until its stdin ends (see holder and startHolder).
const holderEnv = "WALQ_TEST_HOLD_DIR"

// holder opens the ack queue in dir and, until its stdin ends, enqueues,
// leases and acks messages and compacts now and then, so that segments
// are written, cut and removed under the commands run beside it. It
// prints "holding" once the queue is open and, when its stdin ends and
// the queue is closed, how many messages it enqueued and acked.
func holder(dir string) {
	o := fixtureOptions()
	o.SegmentSize = 4096
	q, err := queue.Open(dir, o)
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	stop := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(stop)
	}()
	fmt.Println("holding")
	enq, acked, err := hold(q, stop)
	if cerr := q.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	fmt.Printf("enqueued %d acked %d\n", enq, acked)
}

// hold writes to q until stop: an enqueue, a lease and its ack each
// round, a compaction every 20 rounds.
func hold(q *queue.Queue, stop <-chan struct{}) (enq, acked int, err error) {
	ctx := context.Background()
	for i := 0; ; i++ {
		select {
		case <-stop:
			return enq, acked, nil
		case <-time.After(time.Millisecond): // leaves the machine to the commands
		}
		if _, err := q.Enqueue(ctx, []byte(fmt.Sprintf("live %d %s", i, strings.Repeat("z", 60)))); err != nil {
			return enq, acked, err
		}
		enq++
		m, err := q.TryDequeue()
		if err != nil {
			return enq, acked, err
		}
		if err := m.Ack(); err != nil {
			return enq, acked, err
		}
		acked++
		if i%20 == 19 {
			if err := q.Compact(); err != nil {
				return enq, acked, err
			}
		}
	}
}

// liveHolder is a running holder process.
type liveHolder struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
}

// startHolder starts a holder on dir and waits until it holds the queue.
func startHolder(t *testing.T, dir string) *liveHolder {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), holderEnv+"="+dir)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	h := &liveHolder{cmd: cmd, stdin: stdin, out: bufio.NewReader(stdout)}
	t.Cleanup(func() { _ = h.cmd.Process.Kill(); _ = h.cmd.Wait() })
	line, err := h.out.ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "holding\n", line)
	return h
}

// stop ends the holder: it closes the queue and reports what it did.
func (h *liveHolder) stop(t *testing.T) (enq, acked int) {
	t.Helper()
	require.NoError(t, h.stdin.Close())
	line, err := h.out.ReadString('\n')
	require.NoError(t, err)
	require.NoError(t, h.cmd.Wait())
	_, err = fmt.Sscanf(line, "enqueued %d acked %d", &enq, &acked)
	require.NoError(t, err, "holder said %q", line)
	return enq, acked
}

// TestCommandsBesideALiveQueue: every command run on a queue that
// another process holds open and writes (segments cut and removed under
// it by compactions) either reads the files as they stand, saying so, or
// refuses with status 3, changing nothing, and says what to do instead:
// read it anyway, go through the process's dashboard with --url, or stop
// the process. The process's queue is whole afterwards: verify finds it
// clean, and it holds what the process and the fixture put there.
func TestCommandsBesideALiveQueue(t *testing.T) {
	dir := deadQueue(t) // dead-1 and dead-2 dead, alive ready
	h := startHolder(t, dir)
	note := "another process has " + dir + " open; these figures are as of its last write"
	reads := [][]string{{"stats", dir}, {"stats", "--json", dir}, {"dlq", "list", dir}, {"dlq", "list", "--json", dir},
		{"dlq", "show", dir, "dead-2"}, {"dump", "--payload=false", dir}}
	for round := 0; round < 5; round++ {
		for _, args := range reads {
			r := walq(t, "", args...)
			require.Equal(t, 0, r.code, "round %d: walq %v beside a live queue:\nstdout:\n%s\nstderr:\n%s", round, args, r.stdout, r.stderr)
			if args[0] != "dump" {
				require.Contains(t, r.stderr, note, "walq %v", args)
			}
		}
	}
	writes := [][]string{{"verify", dir}, {"repair", dir}, {"compact", dir}, {"enqueue", dir, "x"}, {"dequeue", dir},
		{"dequeue", "--wait", "1m", dir}, {"ack", dir, "1.4"}, {"nack", "--id", "alive", dir}, {"extend", "--id", "alive", dir},
		{"dlq", "requeue", dir, "dead-1"}, {"dlq", "purge", "--all", dir}}
	for _, args := range writes {
		r := walq(t, "", args...)
		require.Equal(t, 3, r.code, "walq %v beside a live queue:\nstdout:\n%s\nstderr:\n%s", args, r.stdout, r.stderr)
		require.Empty(t, r.stdout, "walq %v", args)
		require.Contains(t, r.stderr, "hint: another process has "+dir+" open", "walq %v", args)
		require.Contains(t, r.stderr, "--url", "walq %v: the hint names the running process's dashboard", args)
		require.Contains(t, r.stderr, "stop that process", "walq %v", args)
	}
	backups, err := filepath.Glob(dir + ".bak-*")
	require.NoError(t, err)
	require.Empty(t, backups, "repair backed up a queue it did not repair")

	enq, acked := h.stop(t)
	require.Positive(t, enq)
	mustWalq(t, 0, "", "verify", dir)
	var s statsJSON
	require.NoError(t, json.Unmarshal([]byte(mustWalq(t, 0, "", "stats", "--json", dir).stdout), &s))
	require.EqualValues(t, 1+enq-acked, s.Ready)
	require.EqualValues(t, 2, s.Dead)
	ds := jsonLines[deadJSON](t, mustWalq(t, 0, "", "dlq", "list", "--json", dir).stdout)
	require.Equal(t, []string{"dead-1", "dead-2"}, []string{ds[0].ID, ds[1].ID})
}

// TestOddTargets: a command given a file, an empty directory, a queue of
// another kind or a dashboard that does not answer says so and changes
// nothing; enqueue alone creates a queue, in an empty directory only.
// Enqueue given a file went on to open it as a queue and failed with the
// error of a mkdir deep inside.
func TestOddTargets(t *testing.T) {
	file := filepath.Join(t.TempDir(), "notes.txt")
	require.NoError(t, os.WriteFile(file, []byte("mine"), 0o600))
	for _, args := range [][]string{{"stats", file}, {"dlq", "list", file}, {"dlq", "show", file, "x"}, {"verify", file},
		{"repair", file}, {"compact", file}, {"dump", file}, {"enqueue", file, "x"}, {"dequeue", file}, {"dlq", "purge", "--all", file}} {
		r := mustWalq(t, 1, "", args...)
		require.Contains(t, r.stderr, file+" is a file, not a walq queue directory", "walq %v", args)
	}
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	require.Equal(t, "mine", string(b))
	backups, err := filepath.Glob(file + ".bak-*")
	require.NoError(t, err)
	require.Empty(t, backups)

	empty := t.TempDir()
	for _, args := range [][]string{{"stats", empty}, {"dlq", "list", empty}, {"verify", empty}, {"repair", empty},
		{"dequeue", empty}, {"ack", empty, "1.4"}} {
		r := mustWalq(t, 1, "", args...)
		require.Contains(t, r.stderr, empty+" is not a walq queue directory (it has no log/)", "walq %v", args)
	}
	require.Empty(t, allFiles(t, empty), "a command that only reads or settles created a queue")
	mustWalq(t, 0, "", "enqueue", empty, "first")

	sorted := sortedQueue(t)
	before := allFiles(t, sorted)
	for _, args := range [][]string{{"enqueue", sorted, "x"}, {"dequeue", sorted}, {"ack", sorted, "1.4"}, {"nack", "--id", "k", sorted}} {
		r := mustWalq(t, 1, "", args...)
		require.Contains(t, r.stderr, "holds a sorted queue", "walq %v", args)
	}
	require.Equal(t, before, allFiles(t, sorted), "a command refused the sorted queue yet changed it")

	r := mustWalq(t, 1, "", "stats", "--url", "http://127.0.0.1:1/queue/")
	require.Contains(t, r.stderr, "connection refused")
	r = mustWalq(t, 1, "", "dlq", "show", "--url", "http://127.0.0.1:1/queue/", "x")
	require.Contains(t, r.stderr, "connection refused")
}
