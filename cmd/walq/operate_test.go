package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
)

// deadJSON is one line of dlq list --json.
type deadJSON struct {
	ID         string `json:"id"`
	Seq        uint64 `json:"seq"`
	Deliveries int    `json:"deliveries"`
	Reason     string `json:"reason"`
	Payload    string `json:"payload"`
	Encoding   string `json:"payload_encoding"`
}

func TestDLQList(t *testing.T) {
	dir := deadQueue(t)
	r := mustWalq(t, 0, "", "dlq", "list", dir)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Len(t, lines, 3)
	require.Regexp(t, `^ID\s+SEQ\s+DELIVERIES\s+ENQUEUED\s+BYTES\s+REASON$`, lines[0])
	require.Regexp(t, `^dead-1\s+1\s+1\s+\S+\s+14\s+poison 1$`, lines[1])
	require.Regexp(t, `^dead-2\s+2\s+1\s+\S+\s+14\s+poison 2$`, lines[2])

	ds := jsonLines[deadJSON](t, mustWalq(t, 0, "", "dlq", "list", "--json", dir).stdout)
	require.Equal(t, []deadJSON{
		{ID: "dead-1", Seq: 1, Deliveries: 1, Reason: "poison 1", Payload: "body of dead-1", Encoding: "text"},
		{ID: "dead-2", Seq: 2, Deliveries: 1, Reason: "poison 2", Payload: "body of dead-2", Encoding: "text"},
	}, ds)
	require.Len(t, jsonLines[deadJSON](t, mustWalq(t, 0, "", "dlq", "list", "--json", "--limit", "1", dir).stdout), 1)
}

func TestDLQShow(t *testing.T) {
	dir := deadQueue(t)
	r := mustWalq(t, 0, "", "dlq", "show", dir, "dead-2")
	for _, want := range []string{"id:         dead-2", "reason:     poison 2", "payload:    14 bytes, text\nbody of dead-2"} {
		require.Contains(t, r.stdout, want)
	}
	var d deadJSON
	require.NoError(t, json.Unmarshal([]byte(mustWalq(t, 0, "", "dlq", "show", "--json", dir, "dead-1").stdout), &d))
	require.Equal(t, "body of dead-1", d.Payload)
	r = mustWalq(t, 5, "", "dlq", "show", dir, "alive")
	require.Contains(t, r.stderr, `no dead letter "alive"`)
}

func TestDLQRequeuePurge(t *testing.T) {
	tests := []struct {
		name        string
		args        []string
		out         string
		ready, dead int64
	}{
		{"requeue one", []string{"requeue", "DIR", "dead-1"}, "requeued dead-1", 2, 1},
		{"requeue all", []string{"requeue", "--all", "DIR"}, "requeued 2 dead letters", 3, 0},
		{"purge one", []string{"purge", "DIR", "dead-2"}, "purged dead-2", 1, 1},
		{"purge all", []string{"purge", "--all", "DIR"}, "purged 2 dead letters", 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := deadQueue(t)
			args := append([]string{"dlq"}, tt.args...)
			for i, a := range args {
				if a == "DIR" {
					args[i] = dir
				}
			}
			require.Equal(t, tt.out+"\n", mustWalq(t, 0, "", args...).stdout)
			s := stats(t, dir)
			require.Equal(t, tt.ready, s.Ready)
			require.Equal(t, tt.dead, s.Dead)
		})
	}
	t.Run("unknown id", func(t *testing.T) {
		r := mustWalq(t, 5, "", "dlq", "purge", deadQueue(t), "alive")
		require.Contains(t, r.stderr, "not found")
	})
}

// messageJSON is dequeue --json's output.
type messageJSON struct {
	Receipt    string            `json:"receipt"`
	ID         string            `json:"id"`
	Deliveries int               `json:"deliveries"`
	EnqueuedAt string            `json:"enqueued_at"`
	Headers    map[string]string `json:"headers"`
	Payload    string            `json:"payload"`
	Encoding   string            `json:"payload_encoding"`
}

func dequeueJSON(t *testing.T, dir string, args ...string) messageJSON {
	t.Helper()
	r := mustWalq(t, 0, "", append(append([]string{"dequeue", "--json"}, args...), dir)...)
	var m messageJSON
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &m), r.stdout)
	return m
}

// TestScriptedConsumer runs a producer and a consumer as separate walq
// invocations, as a shell script would.
func TestScriptedConsumer(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "q")
	id := strings.TrimSpace(mustWalq(t, 0, "", "enqueue", dir, "first").stdout)
	require.Regexp(t, `^[0-9a-f-]{36}$`, id)
	require.Equal(t, "order-7\n", mustWalq(t, 0, "line one\nline two\n", "enqueue", "--id", "order-7",
		"--header", "tenant=acme", "--header", "kind=order", dir).stdout)
	r := mustWalq(t, 6, "", "enqueue", "--id", "order-7", dir, "again")
	require.Contains(t, r.stderr, "duplicate")

	m := dequeueJSON(t, dir)
	require.Equal(t, id, m.ID)
	require.Equal(t, "first", m.Payload)
	require.Equal(t, 1, m.Deliveries)
	require.Equal(t, "acked\n", mustWalq(t, 0, "", "ack", dir, m.Receipt).stdout)
	r = mustWalq(t, 5, "", "ack", dir, m.Receipt)
	require.Contains(t, r.stderr, "lease lost")

	r = mustWalq(t, 0, "", "dequeue", dir)
	require.Regexp(t, `^receipt: \d+\.\d+\.\d+\nid: order-7\ndelivery: 1\nenqueued: \S+\nheader: kind=order\nheader: tenant=acme\n\nline one\nline two\n$`, r.stdout)
	receipt := strings.TrimPrefix(strings.SplitN(r.stdout, "\n", 2)[0], "receipt: ")
	require.Equal(t, "nacked\n", mustWalq(t, 0, "", "nack", dir, receipt).stdout)

	m = dequeueJSON(t, dir)
	require.Equal(t, "order-7", m.ID)
	require.Equal(t, 2, m.Deliveries, "a nacked message comes back with its count")
	require.Equal(t, map[string]string{"tenant": "acme", "kind": "order"}, m.Headers)
	mustWalq(t, 0, "", "ack", "--id", "order-7", dir)

	r = mustWalq(t, 4, "", "dequeue", dir)
	require.Contains(t, r.stderr, "no message is ready")
	start := time.Now()
	mustWalq(t, 4, "", "dequeue", "--wait", "300ms", dir)
	require.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond)
}

func TestDequeueLeaseRunsOut(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "q")
	mustWalq(t, 0, "", "enqueue", "--id", "slow", dir, "work")
	m := dequeueJSON(t, dir, "--ack-timeout", "1500ms")
	mustWalq(t, 4, "", "dequeue", dir) // leased
	again := dequeueJSON(t, dir, "--wait", "5s")
	require.Equal(t, "slow", again.ID)
	require.Equal(t, 2, again.Deliveries)
	mustWalq(t, 5, "", "ack", dir, m.Receipt)
	mustWalq(t, 0, "", "ack", dir, again.Receipt)
}

func TestExtend(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "q")
	mustWalq(t, 0, "", "enqueue", "--id", "long", dir, "work")
	m := dequeueJSON(t, dir) // a 30 s lease
	require.Equal(t, "extended\n", mustWalq(t, 0, "", "extend", "--for", "200ms", dir, m.Receipt).stdout)
	again := dequeueJSON(t, dir, "--wait", "5s") // back once the shortened lease ran out
	require.Equal(t, "long", again.ID)
	require.Equal(t, 2, again.Deliveries)
	mustWalq(t, 5, "", "extend", dir, m.Receipt) // that delivery's lease is gone
	require.Equal(t, "extended\n", mustWalq(t, 0, "", "extend", "--for", "1h", "--id", "long", dir).stdout)
	mustWalq(t, 4, "", "dequeue", "--wait", "300ms", dir) // still leased
	r := mustWalq(t, 1, "", "extend", "--for", "0s", dir, again.Receipt)
	require.Contains(t, r.stderr, "--for must be positive")
	mustWalq(t, 0, "", "ack", dir, again.Receipt)
}

func TestEnqueueRefusesOtherDirectory(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("mine"), 0o600))
	r := mustWalq(t, 1, "", "enqueue", dir, "x")
	require.Contains(t, r.stderr, "is not a walq queue directory")
	require.NoDirExists(t, filepath.Join(dir, "log"))
}

func TestEnqueueDelay(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "q")
	mustWalq(t, 0, "", "enqueue", "--delay", "1h", dir, "later")
	s := stats(t, dir)
	require.EqualValues(t, 1, s.Delayed)
	require.EqualValues(t, 0, s.Ready)
	mustWalq(t, 4, "", "dequeue", dir)
}

// TestLocked runs every command against a directory that this process
// has open: each must refuse with status 3 and say why.
func TestLocked(t *testing.T) {
	dir := deadQueue(t)
	q, err := queue.Open(dir, fixtureOptions())
	require.NoError(t, err)
	defer q.Close()
	_, err = q.Enqueue(context.Background(), []byte("x"))
	require.NoError(t, err)
	settle(t, dir)
	before := treeDigest(t, dir)
	for _, args := range [][]string{
		{"verify", dir}, {"repair", dir}, {"dlq", "purge", "--all", dir}, {"enqueue", dir, "x"}, {"dequeue", dir}, {"ack", dir, "1.4"}, {"compact", dir},
	} {
		t.Run(strings.Join(args[:len(args)-1], " "), func(t *testing.T) {
			r := mustWalq(t, 3, "", args...)
			require.Contains(t, r.stderr, "directory locked by another process")
			require.Contains(t, r.stderr, "hint: another process has "+dir+" open")
			require.Empty(t, r.stdout)
		})
	}
	require.Equal(t, before, treeDigest(t, dir), "no command touched the locked directory")
}

// TestLockedSorted is TestLocked for a sorted queue's directory, which
// the writing commands open as a sorted queue: each refuses with status 3
// while this process has it open, and none changes a file; dlq list, a
// read-only open, still lists the dead value.
func TestLockedSorted(t *testing.T) {
	dir := sortedQueue(t)
	s, err := queue.OpenSorted[int64](dir, &queue.SortedOptions{Options: *fixtureOptions()})
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.Publish(context.Background(), 44, "k", []byte("forty-four")))
	ds, err := s.DeadValues(0, 0)
	require.NoError(t, err)
	require.Len(t, ds, 1)
	name := fmt.Sprintf("%d@%d", ds[0].Seq, ds[0].PublishedAt.UnixNano())
	settle(t, dir)
	before := treeDigest(t, dir)
	for _, args := range [][]string{
		{"dlq", "requeue", dir, name}, {"dlq", "purge", dir, name}, {"dlq", "requeue", "--all", dir},
		{"dlq", "purge", "--all", dir}, {"requeue-expired", dir}, {"compact", dir}, {"repair", dir},
	} {
		t.Run(strings.NewReplacer(dir, "DIR", name, "NAME").Replace(strings.Join(args, " ")), func(t *testing.T) {
			r := mustWalq(t, 3, "", args...)
			require.Contains(t, r.stderr, "directory locked by another process")
			require.Empty(t, r.stdout)
		})
	}
	require.Equal(t, before, treeDigest(t, dir), "no command touched the locked directory")
	require.Contains(t, mustWalq(t, 0, "", "dlq", "list", dir).stdout, name, "a read-only listing beside the owner")
	st := s.Stats()
	require.Equal(t, [2]int{3, 1}, [2]int{st.SortedPending, st.SortedDead}, "the owner's queue is as it was")
}

func TestDemo(t *testing.T) {
	r := mustWalq(t, 0, "", "demo")
	for _, want := range []string{
		"consumer A acked order-1",
		"refused: queue: lease lost",
		"sent SIGKILL after ",
		"torn tail cut: ",
		"3 of its leases are ready again",
		"came back on delivery 2: 3 of 3",
		"\nlost: 0\n",
	} {
		require.Contains(t, r.stdout, want)
	}
	// The lease is 1s: order-2 comes back after it ran out, by a margin
	// that depends on the machine's load.
	require.Regexp(t, `consumer C got order-2 again after 1\.\ds \(delivery 2, same id, same enqueue time: true\)`, r.stdout)
	require.Empty(t, r.stderr)
}

// TestRequeueExpired: requeue-expired ends the leases of a directory's
// queue that ran out, and prints how many: ready again, their deliveries
// kept, or, with --max-deliveries, dead at that limit, which the line
// says it does not count apart.
func TestRequeueExpired(t *testing.T) {
	dir := t.TempDir()
	lease := func() {
		q, err := queue.Open(dir, &queue.Options{AckTimeout: time.Millisecond, ManualRequeue: true, MaxDeliveries: -1})
		require.NoError(t, err)
		_, err = q.TryDequeue()
		require.NoError(t, err)
		require.NoError(t, q.Close()) // after a clean close the lease runs on
	}
	q, err := queue.Open(dir, nil)
	require.NoError(t, err)
	_, err = q.Enqueue(context.Background(), []byte("x"))
	require.NoError(t, err)
	require.NoError(t, q.Close())

	lease()
	require.Equal(t, "ended 1 lease\n", mustWalq(t, 0, "", "requeue-expired", dir).stdout)
	lease()
	require.Equal(t, "ended 1 lease, back to ready or, at 2 deliveries, to the dead set (the count does not split them)\n",
		mustWalq(t, 0, "", "requeue-expired", "--max-deliveries", "2", dir).stdout, "the line says its count takes in the dead-lettered message")
	require.Equal(t, "ended 0 leases\n", mustWalq(t, 0, "", "requeue-expired", dir).stdout)
	require.Equal(t, "ended 0 leases\n", mustWalq(t, 0, "", "requeue-expired", "--max-deliveries", "1", dir).stdout)
	q, err = queue.Open(dir, &queue.Options{ReadOnly: true})
	require.NoError(t, err)
	defer q.Close()
	st := q.Stats()
	require.Equal(t, [3]int64{0, 0, 1}, [3]int64{st.Ready, st.InFlight, st.Dead}, "the second delivery went to the dead set")
	d, err := q.DeadLetters(0, 1)
	require.NoError(t, err)
	require.Equal(t, 2, d[0].Deliveries)
}

// TestRequeueExpiredLocked: requeue-expired on a directory another
// process has open changes nothing and exits 3, saying so.
func TestRequeueExpiredLocked(t *testing.T) {
	dir := t.TempDir()
	q, err := queue.Open(dir, &queue.Options{AckTimeout: time.Millisecond, ManualRequeue: true})
	require.NoError(t, err)
	defer q.Close()
	_, err = q.Enqueue(context.Background(), []byte("x"))
	require.NoError(t, err)
	_, err = q.TryDequeue()
	require.NoError(t, err)
	r := mustWalq(t, 3, "", "requeue-expired", dir)
	require.Empty(t, r.stdout)
	require.Contains(t, r.stderr, "directory locked by another process")
	require.Equal(t, int64(1), q.Stats().InFlight, "the lease is left to its owner")
}

// TestRequeueExpiredSortedDir: requeue-expired refused a sorted queue's
// directory (opened as an ack queue), so that a batch pulled and never
// acked stayed leased until the application opened it again. It now ends
// the batches' leases that ran out: the values are pending again, or,
// with --max-deliveries, dead at that limit.
func TestRequeueExpiredSortedDir(t *testing.T) {
	dir := t.TempDir()
	lease := func() {
		s, err := queue.OpenSorted[int64](dir, &queue.SortedOptions{Options: queue.Options{AckTimeout: time.Millisecond,
			ManualRequeue: true, MaxDeliveries: -1}})
		require.NoError(t, err)
		bs, err := s.TryPull(1)
		require.NoError(t, err)
		require.Len(t, bs, 1)
		require.NoError(t, s.Close()) // after a clean close the lease runs on
	}
	s, err := queue.OpenSorted[int64](dir, nil)
	require.NoError(t, err)
	require.NoError(t, s.Publish(context.Background(), 1, "k", []byte("x")))
	require.NoError(t, s.Close())

	lease()
	require.Equal(t, "ended 1 lease\n", mustWalq(t, 0, "", "requeue-expired", dir).stdout)
	require.Contains(t, mustWalq(t, 0, "", "stats", dir).stdout, "pending     1 values in 1 keys\n  leased      0 values in 0 batches\n")
	lease()
	require.Equal(t, "ended 1 lease, back to ready or, at 2 deliveries, to the dead set (the count does not split them)\n",
		mustWalq(t, 0, "", "requeue-expired", "--max-deliveries", "2", dir).stdout)
	require.Equal(t, "ended 0 leases\n", mustWalq(t, 0, "", "requeue-expired", dir).stdout)
	st := mustWalq(t, 0, "", "stats", dir).stdout
	require.Contains(t, st, "pending     0 values in 0 keys\n  leased      0 values in 0 batches\n  dead        1\n")
}
