package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
)

// walqBin is the walq binary TestMain builds.
var walqBin string

// crashHelperEnv makes the test binary act as a queue process that crashes
// (see TestMain and crashedQueue).
const crashHelperEnv = "WALQ_TEST_CRASH_DIR"

func TestMain(m *testing.M) {
	if dir := os.Getenv(crashHelperEnv); dir != "" {
		crashHelper(dir)
		return
	}
	if dir := os.Getenv(holderEnv); dir != "" {
		holder(dir)
		return
	}
	os.Exit(buildAndRun(m))
}

// buildAndRun builds walq into a temporary directory (with -race when the
// tests run with it) and runs the tests.
func buildAndRun(m *testing.M) int {
	tmp, err := os.MkdirTemp("", "walq-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(tmp)
	walqBin = filepath.Join(tmp, "walq")
	args := []string{"build", "-o", walqBin}
	if raceEnabled {
		args = append(args, "-race")
	}
	out, err := exec.Command("go", append(args, ".")...).CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build walq: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}

// result is what one run of walq printed and returned.
type result struct {
	stdout, stderr string
	code           int // exit status
}

// walq runs the binary with args and stdin, and returns what it did.
func walq(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	cmd := exec.Command(walqBin, args...)
	// A race-enabled binary sleeps a second at exit unless told not to.
	cmd.Env = append(os.Environ(), "GORACE=atexit_sleep_ms=0")
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("run walq %v: %v", args, err)
	}
	if strings.Contains(errOut.String(), "DATA RACE") {
		t.Fatalf("walq %v: race detected:\n%s", args, errOut.String())
	}
	return result{stdout: out.String(), stderr: errOut.String(), code: cmd.ProcessState.ExitCode()}
}

// mustWalq runs walq and fails the test unless it exits with want.
func mustWalq(t *testing.T, want int, stdin string, args ...string) result {
	t.Helper()
	r := walq(t, stdin, args...)
	require.Equal(t, want, r.code, "walq %v\nstdout:\n%s\nstderr:\n%s", args, r.stdout, r.stderr)
	return r
}

// fixtureOptions are the options of the queues the tests make: small
// segments, so that a few hundred messages fill several.
func fixtureOptions() *queue.Options {
	return &queue.Options{SegmentSize: 4096, AckTimeout: time.Minute}
}

// cleanQueue returns a queue directory with n ready messages msg-000…,
// closed cleanly.
func cleanQueue(t *testing.T, n int) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "q")
	q, err := queue.Open(dir, fixtureOptions())
	require.NoError(t, err)
	for i := range n {
		payload := fmt.Sprintf("payload %03d %s", i, strings.Repeat("x", 80))
		_, err := q.Enqueue(context.Background(), []byte(payload), queue.WithID(fmt.Sprintf("msg-%03d", i)),
			queue.WithHeaders(map[string]string{"n": strconv.Itoa(i)}))
		require.NoError(t, err)
	}
	require.NoError(t, q.Close())
	return dir
}

// deadQueue returns a queue directory with two dead letters (dead-1,
// dead-2) and one ready message (alive).
func deadQueue(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "q")
	q, err := queue.Open(dir, fixtureOptions())
	require.NoError(t, err)
	ctx := context.Background()
	for _, id := range []string{"dead-1", "dead-2", "alive"} {
		_, err := q.Enqueue(ctx, []byte("body of "+id), queue.WithID(id))
		require.NoError(t, err)
	}
	for i := 1; i <= 2; i++ {
		m, err := q.TryDequeue()
		require.NoError(t, err)
		require.NoError(t, m.DeadLetter(fmt.Sprintf("poison %d", i)))
	}
	require.NoError(t, q.Close())
	return dir
}

// crashedQueue returns a queue directory whose process enqueued n
// messages, leased two and died of SIGKILL.
func crashedQueue(t *testing.T, n int) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "q")
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), crashHelperEnv+"="+dir, "WALQ_TEST_CRASH_N="+strconv.Itoa(n))
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	require.True(t, errors.As(err, &ee), "crash helper: %v\n%s", err, out)
	ws := ee.Sys().(syscall.WaitStatus)
	require.True(t, ws.Signaled() && ws.Signal() == syscall.SIGKILL, "crash helper: %v\n%s", err, out)
	return dir
}

// crashHelper is the process crashedQueue starts.
func crashHelper(dir string) {
	n, _ := strconv.Atoi(os.Getenv("WALQ_TEST_CRASH_N"))
	q, err := queue.Open(dir, fixtureOptions())
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	for i := range n {
		payload := fmt.Sprintf("payload %03d %s", i, strings.Repeat("y", 80))
		if _, err := q.Enqueue(context.Background(), []byte(payload), queue.WithID(fmt.Sprintf("msg-%03d", i))); err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
	}
	for range 2 {
		if _, err := q.TryDequeue(); err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
	}
	killSelf()
}

// killSelf ends the process as kill -9 does (SIGKILL on unix), with no
// deferred call or Close run.
func killSelf() {
	if p, err := os.FindProcess(os.Getpid()); err == nil {
		_ = p.Kill()
	}
	select {}
}

// tornQueue returns a crashed queue directory whose last segment lost its
// last few bytes, as an interrupted write leaves it.
func tornQueue(t *testing.T) string {
	t.Helper()
	dir := crashedQueue(t, 40)
	last := segments(t, dir)[len(segments(t, dir))-1]
	ends, _ := frames(t, last) // the file holds zeros after them while the log is open
	require.NotEmpty(t, ends, "last segment %s holds no entry to tear", last)
	end := ends[len(ends)-1]
	require.Greater(t, end, int64(16), "last segment %s too short to tear", last)
	require.NoError(t, os.Truncate(last, end-5))
	return dir
}

// corruptQueue returns a queue directory with a bit flipped in the middle
// of its first, sealed, segment.
func corruptQueue(t *testing.T) string {
	t.Helper()
	dir := cleanQueue(t, 200)
	segs := segments(t, dir)
	require.Greater(t, len(segs), 2, "want several segments")
	b, err := os.ReadFile(segs[0])
	require.NoError(t, err)
	b[len(b)/2] ^= 0x10
	require.NoError(t, os.WriteFile(segs[0], b, 0o600))
	return dir
}

// segments returns the log segment files of dir in order.
func segments(t *testing.T, dir string) []string {
	t.Helper()
	segs, err := filepath.Glob(filepath.Join(dir, "log", strings.Repeat("[0-9]", 20)))
	require.NoError(t, err)
	slices.Sort(segs)
	return segs
}

// jsonLines decodes every line of s into a T.
func jsonLines[T any](t *testing.T, s string) []T {
	t.Helper()
	var out []T
	for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
		if line == "" {
			continue
		}
		var v T
		require.NoError(t, json.Unmarshal([]byte(line), &v), "line %q", line)
		out = append(out, v)
	}
	return out
}
