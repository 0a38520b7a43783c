package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
)

// ownerOptions are the options of the application that owns the queues of
// TestWritingCommandsKeepOwnerPolicy: a dedup window and a delivery limit
// other than walq's defaults (no window, 10 deliveries).
func ownerOptions() *queue.Options {
	return &queue.Options{DedupWindow: time.Hour, MaxDeliveries: 20, AckTimeout: time.Minute, SegmentSize: 4096}
}

// copyTree copies the directory src to dst as it is on disk now: what a
// kill -9 of the process that has src open would leave.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	require.NoError(t, filepath.Walk(src, func(path string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if fi.IsDir() {
			return os.MkdirAll(target, 0o700)
		}
		in, err := os.Open(path)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.Create(target)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	}))
}

// ownedQueue returns a queue directory of an application with
// ownerOptions: "order-1" was enqueued and acked (its id refuses a
// duplicate for an hour), and "poison" was nacked 11 times and is leased
// for its 12th delivery, under a limit of 20. With crashed, the directory
// is as a kill -9 left it after that; else the application closed it.
func ownedQueue(t *testing.T, crashed bool) string {
	t.Helper()
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "q")
	q, err := queue.Open(dir, ownerOptions())
	require.NoError(t, err)
	_, err = q.Enqueue(ctx, []byte("order"), queue.WithID("order-1"))
	require.NoError(t, err)
	m, err := q.TryDequeue()
	require.NoError(t, err)
	require.NoError(t, m.Ack())
	_, err = q.Enqueue(ctx, []byte("poison"), queue.WithID("poison"))
	require.NoError(t, err)
	for range 11 {
		m, err := q.TryDequeue()
		require.NoError(t, err)
		require.NoError(t, m.Nack(0))
	}
	m, err = q.TryDequeue()
	require.NoError(t, err)
	require.Equal(t, 12, m.Deliveries)
	if !crashed {
		require.NoError(t, q.Close())
		return dir
	}
	image := filepath.Join(t.TempDir(), "q")
	copyTree(t, dir, image)
	require.NoError(t, q.Close())
	return image
}

// TestWritingCommandsKeepOwnerPolicy: a command that opens a queue to
// change it does not know the application's DedupWindow or
// MaxDeliveries. It must not apply its own in their place: forget an
// acked id that the application's window still holds (a retried enqueue
// would then be taken twice), or dead-letter a message that the
// application's limit still lets through. Repair runs on the directory
// with a torn tail added, so that it salvages and compacts.
func TestWritingCommandsKeepOwnerPolicy(t *testing.T) {
	commands := map[string][]string{
		"enqueue":     {"enqueue", "DIR", "another"},
		"compact":     {"compact", "DIR"},
		"dlq purge":   {"dlq", "purge", "--all", "DIR"},
		"dlq requeue": {"dlq", "requeue", "--all", "DIR"},
		"dequeue":     {"dequeue", "DIR"},
		"ack":         {"ack", "--id", "poison", "DIR"},
		"nack":        {"nack", "--id", "poison", "DIR"},
		"extend":      {"extend", "--id", "poison", "DIR"},
		"repair":      {"repair", "--backup", "DIR.bak", "DIR"},
	}
	for name, args := range commands {
		for _, crashed := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/crashed=%v", name, crashed), func(t *testing.T) {
				dir := ownedQueue(t, crashed)
				if name == "repair" {
					tearTail(t, dir)
				}
				run := make([]string, len(args))
				for i, a := range args {
					run[i] = a
					run[i] = strings.ReplaceAll(a, "DIR", dir)
				}
				r := walq(t, "", run...)
				t.Logf("walq %s: exit %d: %s", name, r.code, r.stderr)

				q, err := queue.Open(dir, ownerOptions())
				require.NoError(t, err)
				defer q.Close()
				_, err = q.Enqueue(context.Background(), []byte("order again"), queue.WithID("order-1"))
				assert.ErrorIs(t, err, queue.ErrDuplicate, "an id acked within the window was forgotten")
				dead, err := q.DeadLetters(0, 0)
				require.NoError(t, err)
				assert.Empty(t, dead, "a message under the application's delivery limit was dead-lettered")
				_, err = q.Enqueue(context.Background(), []byte("poison again"), queue.WithID("poison"))
				assert.ErrorIs(t, err, queue.ErrDuplicate, "the message with 12 of 20 deliveries is gone")
			})
		}
	}
}

// TestWritingCommandsKeepOwnerLimitSorted is TestWritingCommandsKeepOwnerPolicy's
// delivery limit for a sorted queue: a batch pulled for the 12th time of
// 20 when its process died comes back pending, not dead, after walq
// compact and walq dlq purge open the queue.
func TestWritingCommandsKeepOwnerLimitSorted(t *testing.T) {
	for _, args := range [][]string{{"compact", "DIR"}, {"dlq", "purge", "--all", "DIR"}} {
		t.Run(args[0], func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "s")
			o := queue.SortedOptions{Options: *ownerOptions()}
			s, err := queue.OpenSorted[int64](dir, &o)
			require.NoError(t, err)
			require.NoError(t, s.Publish(context.Background(), 1, "k", []byte("poison")))
			for range 11 {
				bs, err := s.TryPull(1)
				require.NoError(t, err)
				require.NoError(t, bs[0].Nack(0))
			}
			bs, err := s.TryPull(1)
			require.NoError(t, err)
			require.Equal(t, 12, bs[0].Values[0].Deliveries)
			image := filepath.Join(t.TempDir(), "s")
			copyTree(t, dir, image)
			require.NoError(t, s.Close())

			run := append([]string(nil), args...)
			run[len(run)-1] = image
			mustWalq(t, 0, "", run...)
			s, err = queue.OpenSorted[int64](image, &o)
			require.NoError(t, err)
			defer s.Close()
			dead, err := s.DeadValues(0, 0)
			require.NoError(t, err)
			require.Empty(t, dead, "a value under the application's delivery limit was dead-lettered")
			bs, err = s.TryPull(1)
			require.NoError(t, err)
			require.Equal(t, "poison", string(bs[0].Values[0].Payload))
		})
	}
}

// TestSortedOpenNotesRecovery: a command that opens a crashed sorted queue
// to change it says what the open did, as it does for an ack queue: the
// crashed process's leased batch is ready again (and nothing about dead
// letters: the command's open dead-letters none).
func TestSortedOpenNotesRecovery(t *testing.T) {
	for _, args := range [][]string{{"compact", "DIR"}, {"dlq", "purge", "--all", "DIR"}} {
		t.Run(args[0], func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "s")
			s, err := queue.OpenSorted[int64](dir, nil)
			require.NoError(t, err)
			require.NoError(t, s.Publish(context.Background(), 1, "k", []byte("v")))
			_, err = s.TryPull(1)
			require.NoError(t, err)
			image := filepath.Join(t.TempDir(), "s")
			copyTree(t, dir, image)
			require.NoError(t, s.Close())

			run := append([]string(nil), args...)
			run[len(run)-1] = image
			r := mustWalq(t, 0, "", run...)
			require.Contains(t, r.stderr, "the previous process crashed; 1 of its leases is ready again\n")
		})
	}
}

// tearTail appends a few bytes to the last segment of the queue in dir:
// the torn tail of an interrupted write, which walq repair cuts.
func tearTail(t *testing.T, dir string) {
	t.Helper()
	segs := segments(t, dir)
	f, err := os.OpenFile(segs[len(segs)-1], os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.Write([]byte{0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07})
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

// TestStatsCountsDedupIDsAsTheOwner: after a crash, walq stats replays
// the acks since the snapshot as the application's open does. It
// replayed them with no dedup window, forgetting each acked id, so its
// dedup ids trailed what the application, with its window, then reports.
func TestStatsCountsDedupIDsAsTheOwner(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "q")
	q, err := queue.Open(dir, ownerOptions())
	require.NoError(t, err)
	ctx := context.Background()
	for _, id := range []string{"a", "b", "c"} {
		_, err := q.Enqueue(ctx, []byte("body of "+id), queue.WithID(id))
		require.NoError(t, err)
	}
	for range 2 {
		m, err := q.TryDequeue()
		require.NoError(t, err)
		require.NoError(t, m.Ack())
	}
	inspected, owned := filepath.Join(t.TempDir(), "i"), filepath.Join(t.TempDir(), "o")
	copyTree(t, dir, inspected) // the crash: the acks are in the log, after the snapshot
	copyTree(t, dir, owned)
	require.NoError(t, q.Close())

	var st struct {
		DedupIDs int `json:"dedup_ids"`
	}
	require.NoError(t, json.Unmarshal([]byte(mustWalq(t, 0, "", "stats", "--json", inspected).stdout), &st))
	o, err := queue.Open(owned, ownerOptions())
	require.NoError(t, err)
	defer o.Close()
	require.Equal(t, 3, o.Stats().DedupIDs, "the owner remembers the acked ids")
	require.Equal(t, o.Stats().DedupIDs, st.DedupIDs, "walq stats counts the dedup ids the owner's open holds")
}
