//go:build linux

package queue_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
)

// fsizeChildEnv makes TestStickyWriteErrorIsLoggedOnce act as the child
// process whose file size limit makes the log's writes fail.
const fsizeChildEnv = "WALQ_TEST_FSIZE_DIR"

// A write that fails poisons the log; the queue logs that once, however
// many calls fail after it. The failure is real: the kernel refuses the
// write past the process's file size limit (RLIMIT_FSIZE), in a child
// process so that the limit touches nothing else.
func TestStickyWriteErrorIsLoggedOnce(t *testing.T) {
	if dir := os.Getenv(fsizeChildEnv); dir != "" {
		fsizeChild(dir)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestStickyWriteErrorIsLoggedOnce$", "-test.count=1")
	cmd.Env = append(os.Environ(), fsizeChildEnv+"="+t.TempDir())
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "child:\n%s\n%s", stdout.String(), stderr.String())

	var refused []map[string]any
	failures := 0
	for _, line := range strings.Split(stdout.String(), "\n") {
		if strings.HasPrefix(line, "failed enqueues: ") {
			_, err := fmt.Sscanf(line, "failed enqueues: %d", &failures)
			require.NoError(t, err)
		}
		if !strings.HasPrefix(line, "{") {
			continue
		}
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m), line)
		if strings.Contains(m["msg"].(string), "refuses writes") {
			refused = append(refused, m)
		}
	}
	require.GreaterOrEqual(t, failures, 3, "child:\n%s", stdout.String())
	require.Len(t, refused, 1, "logged once for %d failed calls:\n%s", failures, stdout.String())
	assert.Equal(t, "ERROR", refused[0]["level"])
	assert.Contains(t, refused[0]["err"], "file too large")
}

// fsizeChild enqueues until the log's writes fail under a 256 KiB file
// size limit, then a few more times, and prints how many calls failed.
func fsizeChild(dir string) {
	signal.Ignore(syscall.SIGXFSZ) // a write past the limit fails with EFBIG instead of killing
	lim := syscall.Rlimit{Cur: 256 << 10, Max: 256 << 10}
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
		fmt.Println("setrlimit:", err)
		os.Exit(2)
	}
	logger := slog.New(slog.NewJSONHandler(os.Stdout, nil))
	q, err := queue.Open(dir, &queue.Options{SegmentSize: 1 << 20, SnapshotBytes: 64 << 20, Logger: logger})
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(2)
	}
	payload := bytes.Repeat([]byte("x"), 4096)
	failed := 0
	for i := 0; i < 200 && failed < 5; i++ {
		if _, err := q.Enqueue(context.Background(), payload); err != nil {
			failed++
		}
	}
	time.Sleep(200 * time.Millisecond) // the housekeeper logs the first refused write
	_ = q.Close()                      // fails too: the log is poisoned
	fmt.Printf("failed enqueues: %d\n", failed)
}
