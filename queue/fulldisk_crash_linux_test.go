//go:build linux

package queue_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/walq/walq/internal/tmpfs"
	"github.com/walq/walq/queue"
)

// fullCrashChildEnv makes TestFullDiskCrashReopen act as the child that
// fills the disk and is killed; its value is the JSON of a fullCrashChild.
const fullCrashChildEnv = "WALQ_TEST_FULLCRASH"

// fullChildDeadline is how long the child may take to fill the disk (a
// few seconds under the race detector on a loaded machine).
const fullChildDeadline = time.Minute

// fullCrashChild is what the parent tells the child.
type fullCrashChild struct {
	Dir  string
	Kind string // "ack", "sorted" or "windowed"
}

// fullKinds are the three kinds of queue the full-disk crash runs on.
var fullKinds = []string{"ack", "sorted", "windowed"}

// fullPayload is the payload of message i: it names i and fills about
// 1 KiB, so that a 2 MiB disk fills in about two thousand messages.
func fullPayload(i int) string { return fmt.Sprintf("%06d-%0994d", i, i) }

// fullIndex reads back the i of a fullPayload, checking the rest.
func fullIndex(t *testing.T, p []byte) int {
	t.Helper()
	i, err := strconv.Atoi(string(p[:6]))
	require.NoError(t, err, "payload %.20q", p)
	require.Equal(t, fullPayload(i), string(p), "payload of message %d", i)
	return i
}

// fullQueue is one of the three kinds of queue, seen as messages named
// by their index.
type fullQueue interface {
	put(i int) error
	// take delivers the next key's values (ack queue: one message); it
	// returns ErrEmpty when nothing is ready.
	take() ([][]byte, func() error, error)
	Compact() error
	Close() error
}

type fullAck struct{ *queue.Queue }

func (q fullAck) put(i int) error {
	_, err := q.Enqueue(context.Background(), []byte(fullPayload(i)))
	return err
}

func (q fullAck) take() ([][]byte, func() error, error) {
	m, err := q.TryDequeue()
	if err != nil {
		return nil, nil, err
	}
	return [][]byte{m.Payload}, m.Ack, nil
}

// fullBatches is the take of a sorted or windowed queue.
func fullBatches[K queue.SortKey](bs []*queue.Batch[K], err error) ([][]byte, func() error, error) {
	if err != nil {
		return nil, nil, err
	}
	var ps [][]byte
	for _, v := range bs[0].Values {
		ps = append(ps, v.Payload)
	}
	return ps, bs[0].Ack, nil
}

func fullKey(i int) string { return fmt.Sprintf("k%02d", i%40) }

type fullSorted struct{ *queue.Sorted[int64] }

func (s fullSorted) put(i int) error {
	return s.Publish(context.Background(), int64(i), fullKey(i), []byte(fullPayload(i)))
}

func (s fullSorted) take() ([][]byte, func() error, error) { return fullBatches(s.TryPull(1)) }

type fullWindowed struct{ *queue.Windowed }

func (w fullWindowed) put(i int) error {
	return w.Publish(context.Background(), fullKey(i), []byte(fullPayload(i)))
}

func (w fullWindowed) take() ([][]byte, func() error, error) { return fullBatches(w.TryPull(1)) }

// openFull opens the queue of kind in dir.
func openFull(dir, kind string) (fullQueue, error) {
	o := queue.Options{SegmentSize: 256 << 10}
	switch kind {
	case "sorted":
		s, err := queue.OpenSorted[int64](dir, &queue.SortedOptions{Options: o})
		if err != nil {
			return nil, err
		}
		return fullSorted{s}, nil
	case "windowed":
		w, err := queue.OpenWindowed(dir, &queue.WindowOptions{SortedOptions: queue.SortedOptions{Options: o}, Window: time.Millisecond})
		if err != nil {
			return nil, err
		}
		return fullWindowed{w}, nil
	}
	q, err := queue.Open(dir, &o)
	if err != nil {
		return nil, err
	}
	return fullAck{q}, nil
}

// runFullCrashChild fills the disk: it puts messages, and after every
// third takes one delivery, acking every other one and leaving the rest
// leased, until a call fails; then it says "ready" and waits for its
// SIGKILL. Report lines (one write each): "e I" put returned nil, "f I"
// put failed, "k I"/"K I" ack started/returned nil, "F err" the failure.
func runFullCrashChild(c fullCrashChild) {
	say := func(format string, args ...any) { _, _ = os.Stdout.WriteString(fmt.Sprintf(format, args...) + "\n") }
	q, err := openFull(c.Dir, c.Kind)
	if err != nil {
		say("F open: %v", err)
		os.Exit(2)
	}
	takes := 0
	err = func() error {
		for i := 0; ; i++ {
			if err := q.put(i); err != nil {
				say("f %d", i)
				return err
			}
			say("e %d", i)
			if i%3 != 2 {
				continue
			}
			ps, ack, err := q.take()
			if errors.Is(err, queue.ErrEmpty) { // a windowed key not due yet
				continue
			}
			if err != nil {
				return err
			}
			if takes++; takes%2 == 1 {
				continue // left leased
			}
			for _, p := range ps {
				say("k %s", p[:6])
			}
			if err := ack(); err != nil {
				return err
			}
			for _, p := range ps {
				say("K %s", p[:6])
			}
		}
	}()
	say("F %v", err)
	say("ready")
	select {}
}

// fullOracle is what the child reported.
type fullOracle struct {
	put    map[int]bool // put returned nil
	failed map[int]bool // put failed: it may have been written
	acking map[int]bool // ack started, not returned
	acked  map[int]bool // ack returned nil
	fail   string       // the child's failure
}

// runFullChild runs the child on dir, kills it with SIGKILL once it is
// ready, and returns what it reported.
func runFullChild(t *testing.T, c fullCrashChild) fullOracle {
	t.Helper()
	cfg, err := json.Marshal(c)
	require.NoError(t, err)
	cmd := exec.Command(os.Args[0], "-test.run=^TestFullDiskCrashReopen$", "-test.count=1")
	cmd.Env = append(os.Environ(), fullCrashChildEnv+"="+string(cfg))
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	// The child dies with the test process (a timeout's panic runs no
	// cleanup), and one that hangs is killed: the test then fails, rather
	// than hangs, and no child is left holding the mount.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	require.NoError(t, cmd.Start())
	hung := time.AfterFunc(fullChildDeadline, func() { _ = cmd.Process.Kill() })
	o := fullOracle{put: map[int]bool{}, failed: map[int]bool{}, acking: map[int]bool{}, acked: map[int]bool{}}
	sc := bufio.NewScanner(out)
	ready := false
	for !ready && sc.Scan() {
		line := sc.Text()
		code, arg, _ := strings.Cut(line, " ")
		n, _ := strconv.Atoi(arg)
		switch code {
		case "e":
			o.put[n] = true
		case "f":
			o.failed[n] = true
		case "k":
			o.acking[n] = true
		case "K":
			delete(o.acking, n)
			o.acked[n] = true
		case "F":
			o.fail = arg
		case "ready":
			ready = true
		}
	}
	hung.Stop()
	kerr := cmd.Process.Kill()
	err = cmd.Wait()
	require.True(t, ready, "the child ended, or hung %v, before it was ready: %v\n%s", fullChildDeadline, err, stderr.String())
	require.NoError(t, kerr)
	var ee *exec.ExitError
	require.True(t, errors.As(err, &ee) && ee.Sys().(syscall.WaitStatus).Signal() == syscall.SIGKILL, "child: %v", err)
	return o
}

// TestFullDiskCrashReopen: a process fills a queue's disk with puts and
// leases (some acked, some left leased) and is killed with SIGKILL; the
// disk is then filled to the last byte. Opened on the still-full disk, the
// queue either opens or fails with an error wrapping ENOSPC, twice over,
// and what it delivers there is never a message whose ack returned nil.
// Once the operator frees space, it opens and delivers every message whose
// put returned nil and whose ack did not, exactly once, with its payload;
// the put that failed may come back too. For the ack, sorted and windowed
// queues.
func TestFullDiskCrashReopen(t *testing.T) {
	if s := os.Getenv(fullCrashChildEnv); s != "" {
		var c fullCrashChild
		require.NoError(t, json.Unmarshal([]byte(s), &c))
		runFullCrashChild(c)
		return
	}
	for _, kind := range fullKinds {
		t.Run(kind, func(t *testing.T) { testFullDiskCrashReopen(t, kind) })
	}
}

func testFullDiskCrashReopen(t *testing.T, kind string) {
	mnt := tmpfs.Mount(t, "size=2m")
	filler := filepath.Join(mnt, "filler")
	require.NoError(t, os.WriteFile(filler, make([]byte, 256<<10), 0o600))
	dir := filepath.Join(mnt, "q")
	o := runFullChild(t, fullCrashChild{Dir: dir, Kind: kind})
	require.Contains(t, o.fail, "no space left on device", "the child stopped for another reason")
	require.NotEmpty(t, o.acked)
	t.Logf("%s: %d put, %d acked, %d acks cut, the child's failure: %s", kind, len(o.put), len(o.acked), len(o.acking), o.fail)
	topUp := filepath.Join(mnt, "topup") // the zeros ahead cut back, the disk is still full
	tmpfs.Fill(t, topUp)

	consumed := map[int]int{} // delivered and acked, after the crash
	// take delivers one key's values (one message) and acks them; it
	// returns the delivery's error, or the ack's.
	take := func(q fullQueue) error {
		ps, ack, err := q.take()
		if err != nil {
			return err
		}
		var is []int
		for _, p := range ps {
			i := fullIndex(t, p)
			require.False(t, o.acked[i], "message %d delivered again after its ack returned nil", i)
			require.True(t, o.put[i] || o.failed[i] || o.acking[i], "message %d was never put", i)
			is = append(is, i)
		}
		if err := ack(); err != nil {
			return err
		}
		for _, i := range is {
			consumed[i]++
			require.Equal(t, 1, consumed[i], "message %d delivered and acked twice", i)
		}
		return nil
	}

	// 1. Opened on the full disk, twice: the second open meets what the
	//    first wrote before it failed.
	for round := 1; round <= 2; round++ {
		q, err := openFull(dir, kind)
		if err != nil {
			require.ErrorIs(t, err, syscall.ENOSPC, "open %d on the full disk", round)
			t.Logf("open %d on the full disk: %v", round, err)
			continue
		}
		for err == nil {
			err = take(q)
		}
		if !errors.Is(err, queue.ErrEmpty) {
			require.ErrorIs(t, err, syscall.ENOSPC, "open %d on the full disk: delivery or ack", round)
		}
		t.Logf("open %d on the full disk: opened; %d acked after the crash, then %v; close: %v", round, len(consumed), err, q.Close())
	}

	tmps, err := filepath.Glob(filepath.Join(dir, "*.tmp"))
	require.NoError(t, err)
	require.Empty(t, tmps, "a snapshot that did not fit is left behind")

	// 2. Space freed: everything comes back once.
	require.NoError(t, os.Remove(filler))
	require.NoError(t, os.Remove(topUp))
	q, err := openFull(dir, kind)
	require.NoError(t, err)
	t.Cleanup(func() { _ = q.Close() }) // before the unmount
	for takes := 1; ; takes++ {
		err := take(q)
		if errors.Is(err, queue.ErrEmpty) {
			break
		}
		require.NoError(t, err, "take %d after freeing", takes)
		if takes%100 == 0 {
			require.NoError(t, q.Compact(), "compaction after take %d", takes)
		}
	}
	for i := range o.put {
		if !o.acked[i] && !o.acking[i] {
			require.Equal(t, 1, consumed[i], "message %d (put returned nil, never acked) delivered %d times", i, consumed[i])
		}
	}
	require.NoError(t, q.Close())
}
