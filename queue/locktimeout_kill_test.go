package queue_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
)

// killedHolderEnv names the directory a child of
// TestLockTimeoutWaitsOutAKilledWriter opens; set, the test is the child.
const killedHolderEnv = "WALQ_LOCKTIMEOUT_CHILD_DIR"

// An Open waiting on its LockTimeout for a process that is killed with
// SIGKILL while it holds the queue opens once the kernel lets go of the
// dead process's lock, and has what that process was told is done: the
// messages it enqueued, without the one it acked.
func TestLockTimeoutWaitsOutAKilledWriter(t *testing.T) {
	if dir := os.Getenv(killedHolderEnv); dir != "" {
		runKilledHolder(dir)
		return
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestLockTimeoutWaitsOutAKilledWriter$", "-test.count=1")
	cmd.Env = append(os.Environ(), killedHolderEnv+"="+dir)
	stdin, err := cmd.StdinPipe() // the child holds the queue until it reads EOF: it dies with the test
	require.NoError(t, err)
	defer stdin.Close()
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err, "the child ended before it was ready")
	require.Equal(t, "ready\n", line)

	done := openAfter(dir, &queue.Options{LockTimeout: time.Minute})
	select {
	case r := <-done:
		t.Fatalf("Open returned (%v) while a live process had the queue open", r.err)
	case <-time.After(100 * time.Millisecond):
	}
	require.NoError(t, cmd.Process.Kill())
	require.Error(t, cmd.Wait(), "the child was killed")

	r := <-done
	require.NoError(t, r.err, "Open after the holder was killed, within LockTimeout")
	defer r.q.Close()
	for _, want := range []string{"b", "c"} {
		require.Equal(t, want, string(tryDequeue(t, r.q).Payload))
	}
	requireEmpty(t, r.q)
}

// runKilledHolder is the child of TestLockTimeoutWaitsOutAKilledWriter:
// it enqueues a, b and c, acks a, says ready and holds the queue open
// until its stdin ends or it is killed.
func runKilledHolder(dir string) {
	ctx := context.Background()
	q, err := queue.Open(dir, &queue.Options{Sync: queue.SyncAlways})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	for _, p := range []string{"a", "b", "c"} {
		if _, err = q.Enqueue(ctx, []byte(p)); err != nil {
			break
		}
	}
	var m *queue.Message
	if err == nil {
		m, err = q.TryDequeue()
	}
	if err == nil {
		err = m.Ack()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	fmt.Println("ready")
	_, _ = io.Copy(io.Discard, os.Stdin)
	os.Exit(0)
}
