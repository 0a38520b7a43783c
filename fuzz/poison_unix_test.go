//go:build unix

package fuzz_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/walq/walq/queue"
)

// A poison message kills the process that consumes it. The queue promises
// that such a message reaches the dead-letter set after MaxDeliveries
// crashes instead of crash-looping forever (queue/doc.go, "After a
// crash"). TestPoisonCrashLoop checks it with real crashes: a child opens
// the queue, takes the poison (one Dequeue, a DequeueBatch or a sorted
// Pull) and SIGKILLs itself the moment the call returns, that is right
// after the lease record was written and before any fsync of its own.
// After MaxDeliveries such children the poison is dead, whole and once, and
// no further child gets it; in the variants with a compaction, each child
// compacts (snapshot and log cut) before it takes the poison. In the
// variants with a hook, a tool opens the queue before each child as walq's
// writing commands do (MaxDeliveries -1: it ends the crashed child's lease
// without dead-lettering), compacts and closes it: the limit still holds.
// The variants, each in a directory of its own, run side by side: most of
// their time is the start of a child process.

const poisonEnv = "WALQ_POISON_CHILD"

const poisonMax = 3 // MaxDeliveries

type poisonConfig struct {
	Dir     string
	Kind    string // "one", "batch", "sorted"
	Sync    int
	Compact bool
	Hook    bool // open with MaxDeliveries -1, compact and close before each child
}

func poisonOptions(c poisonConfig) queue.Options {
	return queue.Options{MaxDeliveries: poisonMax, Sync: queue.SyncMode(c.Sync), SegmentSize: 4 << 10,
		SnapshotBytes: 8 << 10, AckTimeout: time.Hour}
}

var poisonPayloads = []string{"poison one", "poison two"}

// poisonChild is the child's side: it takes what is ready, reports it on
// stdout and dies.
func poisonChild(t *testing.T, c poisonConfig) {
	o := poisonOptions(c)
	var got []string
	if c.Kind == "sorted" {
		s, err := queue.OpenSorted[int64](c.Dir, &queue.SortedOptions{Options: o})
		require.NoError(t, err)
		if c.Compact {
			require.NoError(t, s.Compact())
		}
		bs, err := s.TryPull(10)
		if errors.Is(err, queue.ErrEmpty) {
			fmt.Println("empty")
			os.Exit(0)
		}
		require.NoError(t, err)
		for _, b := range bs {
			for _, v := range b.Values {
				got = append(got, string(v.Payload))
			}
		}
	} else {
		q, err := queue.Open(c.Dir, &o)
		require.NoError(t, err)
		if c.Compact {
			require.NoError(t, q.Compact())
		}
		var ms queue.Messages
		if c.Kind == "batch" {
			// The 2 s are for the wait alone: the open and the compaction
			// before it take longer when the variants run side by side
			// under the race detector, and a deadline that ran out in them
			// would read as an empty queue.
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			ms, err = q.DequeueBatch(ctx, 10)
		} else {
			var m *queue.Message
			m, err = q.TryDequeue()
			ms = queue.Messages{m}
		}
		if errors.Is(err, queue.ErrEmpty) || errors.Is(err, context.DeadlineExceeded) {
			fmt.Println("empty")
			os.Exit(0)
		}
		require.NoError(t, err)
		for _, m := range ms {
			got = append(got, string(m.Payload))
		}
	}
	fmt.Println("got " + strings.Join(got, "|"))
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {}
}

// runPoisonChild runs one child and returns what it reported.
func runPoisonChild(t *testing.T, c poisonConfig) string {
	t.Helper()
	cfg, err := json.Marshal(c)
	require.NoError(t, err)
	cmd := exec.Command(os.Args[0], "-test.run=^TestPoisonCrashLoop$", "-test.count=1")
	cmd.Env = append(os.Environ(), poisonEnv+"="+string(cfg))
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	line := strings.TrimSpace(out.String())
	if strings.HasPrefix(line, "got ") {
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee, "the child must have killed itself")
		return line
	}
	require.Equal(t, "empty", line, "child output %q, stderr %q, err %v", out.String(), errOut.String(), err)
	return line
}

func TestPoisonCrashLoop(t *testing.T) {
	if s := os.Getenv(poisonEnv); s != "" {
		var c poisonConfig
		require.NoError(t, json.Unmarshal([]byte(s), &c))
		poisonChild(t, c)
		return
	}
	for _, kind := range []string{"one", "batch", "sorted"} {
		for _, sync := range []queue.SyncMode{queue.SyncAlways, queue.SyncNever} {
			for _, compact := range []bool{false, true} {
				name := fmt.Sprintf("%s/sync=%d/compact=%v", kind, sync, compact)
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					c := poisonConfig{Dir: t.TempDir(), Kind: kind, Sync: int(sync), Compact: compact}
					poisonCrashLoop(t, c)
				})
			}
			t.Run(fmt.Sprintf("%s/sync=%d/hook", kind, sync), func(t *testing.T) {
				t.Parallel()
				c := poisonConfig{Dir: t.TempDir(), Kind: kind, Sync: int(sync), Hook: true}
				poisonCrashLoop(t, c)
			})
		}
	}
}

func poisonCrashLoop(t *testing.T, c poisonConfig) {
	o := poisonOptions(c)
	want := poisonPayloads[:1]
	if c.Kind != "one" {
		want = poisonPayloads
	}
	ctx := context.Background()
	// Publish the poison and close cleanly.
	if c.Kind == "sorted" {
		s, err := queue.OpenSorted[int64](c.Dir, &queue.SortedOptions{Options: o})
		require.NoError(t, err)
		for i, p := range want {
			require.NoError(t, s.Publish(ctx, int64(i), "k", []byte(p)))
		}
		require.NoError(t, s.Close())
	} else {
		q, err := queue.Open(c.Dir, &o)
		require.NoError(t, err)
		for _, p := range want {
			_, err := q.Enqueue(ctx, []byte(p))
			require.NoError(t, err)
		}
		require.NoError(t, q.Close())
	}
	for i := 1; i <= poisonMax; i++ {
		poisonHook(t, c)
		got := runPoisonChild(t, c)
		require.Equal(t, "got "+strings.Join(want, "|"), got, "crash %d of %d must deliver the poison", i, poisonMax)
	}
	// The next consumer must not get it: it is dead, whole, once.
	poisonHook(t, c)
	require.Equal(t, "empty", runPoisonChild(t, c), "the poison after %d crashing deliveries", poisonMax)
	var dead []string
	if c.Kind == "sorted" {
		s, err := queue.OpenSorted[int64](c.Dir, &queue.SortedOptions{Options: o})
		require.NoError(t, err)
		defer func() { require.NoError(t, s.Close()) }()
		_, err = s.TryPull(10) // with a hook, this dead-letters them (as the child's did)
		require.ErrorIs(t, err, queue.ErrEmpty)
		dv, err := s.DeadValues(0, 0)
		require.NoError(t, err)
		for _, d := range dv {
			dead = append(dead, string(d.Payload))
			require.Equal(t, poisonMax, d.Deliveries, "%q", d.Payload)
		}
		require.Zero(t, s.Stats().SortedPending+s.Stats().SortedLeased)
	} else {
		q, err := queue.Open(c.Dir, &o)
		require.NoError(t, err)
		defer func() { require.NoError(t, q.Close()) }()
		_, err = q.TryDequeue() // with a hook, this dead-letters it (as the child's did)
		require.ErrorIs(t, err, queue.ErrEmpty)
		dl, err := q.DeadLetters(0, 0)
		require.NoError(t, err)
		for _, d := range dl {
			dead = append(dead, string(d.Payload))
			require.Equal(t, poisonMax, d.Deliveries, "%q", d.Payload)
		}
	}
	require.Equal(t, want, dead)
}

// poisonHook is, with c.Hook, a start-up hook run before each child: an
// open that applies no delivery limit (as walq's writing commands open a
// queue), a compaction and a clean close.
func poisonHook(t *testing.T, c poisonConfig) {
	t.Helper()
	if !c.Hook {
		return
	}
	o := poisonOptions(c)
	o.MaxDeliveries = -1
	if c.Kind == "sorted" {
		s, err := queue.OpenSorted[int64](c.Dir, &queue.SortedOptions{Options: o})
		require.NoError(t, err)
		require.NoError(t, s.Compact())
		require.NoError(t, s.Close())
		return
	}
	q, err := queue.Open(c.Dir, &o)
	require.NoError(t, err)
	require.NoError(t, q.Compact())
	require.NoError(t, q.Close())
}
