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
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/queue/queuetest"
	"github.com/walq/walq/redisq"
	"github.com/walq/walq/redisq/internal/redistest"
)

// The command is tested as users run it: the binary, built once by
// TestMain, against a redis-server of the test's own.

var bin string

func TestMain(m *testing.M) {
	tmp, err := os.MkdirTemp("", "walq-redis-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin = filepath.Join(tmp, "walq-redis")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build walq-redis: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(tmp)
	os.Exit(code)
}

type result struct {
	stdout, stderr string
	code           int
}

// run runs the binary and fails the test unless it exits with want.
func run(t *testing.T, want int, stdin string, args ...string) result {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("run %v: %v", args, err)
	}
	r := result{stdout: out.String(), stderr: errOut.String(), code: cmd.ProcessState.ExitCode()}
	require.Equal(t, want, r.code, "walq-redis %v\nstdout:\n%s\nstderr:\n%s", args, r.stdout, r.stderr)
	return r
}

// TestOperate runs enqueue, stats, dequeue and ack (by receipt and by id)
// on a Redis queue named by URL.
func TestOperate(t *testing.T) {
	srv := redistest.Start(t)
	url := "redis://" + srv.Addr + "/0/jobs"

	require.Equal(t, "order-1\n", run(t, 0, "", "enqueue", "--id", "order-1", "--header", "tenant=acme", url, "latte").stdout)
	run(t, 0, "espresso", "enqueue", "--id", "order-2", url)
	r := run(t, 6, "", "enqueue", "--id", "order-1", url, "again")
	require.Contains(t, r.stderr, "duplicate")

	var st struct {
		Ready  int64 `json:"ready"`
		Totals struct {
			Enqueued uint64 `json:"enqueued"`
			Acked    uint64 `json:"acked"`
		} `json:"totals"`
	}
	require.NoError(t, json.Unmarshal([]byte(run(t, 0, "", "stats", "--json", url).stdout), &st))
	require.Equal(t, int64(2), st.Ready)
	require.Equal(t, uint64(2), st.Totals.Enqueued)

	var m struct {
		Receipt string            `json:"receipt"`
		ID      string            `json:"id"`
		Payload string            `json:"payload"`
		Headers map[string]string `json:"headers"`
	}
	require.NoError(t, json.Unmarshal([]byte(run(t, 0, "", "dequeue", "--json", url).stdout), &m))
	require.Equal(t, "order-1", m.ID)
	require.Equal(t, "latte", m.Payload)
	require.Equal(t, map[string]string{"tenant": "acme"}, m.Headers)
	require.Equal(t, "acked\n", run(t, 0, "", "ack", url, m.Receipt).stdout)
	run(t, 5, "", "ack", url, m.Receipt) // acked already: the lease is gone

	text := run(t, 0, "", "dequeue", url).stdout
	require.Contains(t, text, "id: order-2\n")
	require.True(t, strings.HasSuffix(text, "\nespresso\n"), text)
	require.Equal(t, "acked\n", run(t, 0, "", "ack", "--id", "order-2", url).stdout)
	run(t, 4, "", "dequeue", url) // empty

	r = run(t, 0, "", "stats", url)
	require.Contains(t, r.stdout, "queue "+url+"\n")
	require.Contains(t, r.stdout, "enqueued 2, delivered 2, acked 2")
}

// TestDeadLetters lists, shows, requeues and purges the dead letters of a
// Redis queue.
func TestDeadLetters(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	q, err := redisq.Open(ctx, srv.Client(), "jobs", nil)
	require.NoError(t, err)
	defer q.Close()
	for _, id := range []string{"dead-1", "dead-2", "dead-3"} {
		_, err := q.Enqueue(ctx, []byte("body of "+id), queue.WithID(id))
		require.NoError(t, err)
	}
	for range 3 {
		m, err := q.TryDequeue()
		require.NoError(t, err)
		require.NoError(t, m.DeadLetter("poison "+m.ID))
	}
	url := "redis://" + srv.Addr + "/jobs"

	list := run(t, 0, "", "dlq", "list", url).stdout
	for _, id := range []string{"dead-1", "dead-2", "dead-3"} {
		require.Contains(t, list, id)
		require.Contains(t, list, "poison "+id)
	}
	require.Contains(t, run(t, 0, "", "dlq", "show", url, "dead-2").stdout, "body of dead-2")
	require.Equal(t, "requeued dead-1\n", run(t, 0, "", "dlq", "requeue", url, "dead-1").stdout)
	run(t, 5, "", "dlq", "requeue", url, "dead-1") // no longer dead
	require.Equal(t, "purged dead-2\n", run(t, 0, "", "dlq", "purge", url, "dead-2").stdout)
	require.Equal(t, "purged 1 dead letter\n", run(t, 0, "", "dlq", "purge", "--all", url).stdout)
	s, err := q.StatsContext(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(1), s.Ready, "dead-1 requeued")
	require.Zero(t, s.Dead)
}

// TestRefusesServerForWrites: a server without appendonly is refused for
// a change, with what to change, and still read by stats.
func TestRefusesServerForWrites(t *testing.T) {
	srv := redistest.Start(t, "--appendonly", "no", "--maxmemory-policy", "noeviction")
	url := "redis://" + srv.Addr + "/0/jobs"
	r := run(t, 1, "", "enqueue", url, "x")
	require.Contains(t, r.stderr, "appendonly")
	run(t, 0, "", "stats", url)
}

// TestTargets: a URL without a queue name is refused with the form it
// wants.
func TestTargets(t *testing.T) {
	srv := redistest.Start(t)
	r := run(t, 1, "", "stats", "redis://"+srv.Addr)
	require.Contains(t, r.stderr, "NAME")
}

// TestTargetNameEscaped: a queue whose name has a '/' or a '%' in it is
// named by its %-escaped name; walq-redis named no such queue before, and
// read the escapes as part of the name.
func TestTargetNameEscaped(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	q, err := redisq.Open(ctx, srv.Client(), "team/jobs 50%", nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = q.Close() })
	_, err = q.Enqueue(ctx, []byte("latte"))
	require.NoError(t, err)

	url := "redis://" + srv.Addr + "/0/team%2Fjobs%2050%25"
	var st struct {
		Ready int64 `json:"ready"`
	}
	require.NoError(t, json.Unmarshal([]byte(run(t, 0, "", "stats", "--json", url).stdout), &st))
	require.EqualValues(t, 1, st.Ready, "the queue the escaped name names")
	require.Contains(t, run(t, 0, "", "dequeue", url).stdout, "\nlatte\n")
	r := run(t, 1, "", "stats", "redis://"+srv.Addr+"/0/50%off")
	require.Contains(t, r.stderr, "%25")
}

// TestHelpNamesTheURL: the overview says which commands take a queue URL
// and its form, so that a user need not read the package doc.
func TestHelpNamesTheURL(t *testing.T) {
	r := run(t, 0, "", "help")
	require.Contains(t, r.stdout, "redis://[user:password@]host:port[/db]/NAME")
	require.Contains(t, r.stdout, "stats, dlq, enqueue, dequeue, ack, nack, extend and requeue-expired")
	require.Contains(t, r.stdout, "There stats, dlq list and dlq show change nothing")
}

// TestDemo runs the demo's consumer steps on the Redis server: the late
// ack of the dead consumer is refused, the redelivery comes.
func TestDemo(t *testing.T) {
	srv := redistest.Start(t)
	r := run(t, 0, "", "demo", "--redis", "redis://"+srv.Addr+"/0")
	require.Contains(t, r.stdout, "(delivery 2, same id")
	require.Contains(t, r.stdout, "late ack with its old receipt is refused")
}

// TestRefusesSortedQueue: the commands but stats, dlq and
// requeue-expired run on ack queues; a name
// that holds a sorted or windowed queue and no ack queue is refused,
// saying so, instead of being shown as an empty ack queue or given one
// beside it. A name that holds both is the ack queue's.
func TestRefusesSortedQueue(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	s, err := redisq.OpenSorted[int64](ctx, srv.Client(), "events", nil)
	require.NoError(t, err)
	defer s.Close()
	url := "redis://" + srv.Addr + "/0/events"
	for _, args := range [][]string{{"enqueue", url, "x"}, {"dequeue", url}} {
		r := run(t, 1, "", args...)
		require.Contains(t, r.stderr, "is a sorted or windowed queue; walq-redis runs only stats, dlq and requeue-expired on it", "walq-redis %v", args)
	}
	require.NoError(t, s.Publish(ctx, 1, "k", []byte("v")))
	run(t, 1, "", "enqueue", url, "x")
	st := s.Stats()
	require.Equal(t, 1, st.SortedPending, "the sorted queue is left as it was")

	q, err := redisq.Open(ctx, srv.Client(), "events", nil)
	require.NoError(t, err)
	defer q.Close()
	_, err = q.Enqueue(ctx, []byte("ack"))
	require.NoError(t, err)
	require.Contains(t, run(t, 0, "", "stats", url).stdout, "enqueued 1")
}

// TestAppliesNoPolicyOfItsOwn: the application's MaxDeliveries and
// DedupWindow are recorded nowhere on the server, so the commands apply
// none of their own in their place: a dequeue and a nack leave a message
// that the application's limit (20) still lets through deliverable, and
// an ack keeps the id that the application's window still holds, as an
// enqueue refuses an id that window still holds.
func TestAppliesNoPolicyOfItsOwn(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	app, err := redisq.Open(ctx, srv.Client(), "jobs", &redisq.Options{MaxDeliveries: 20, DedupWindow: time.Hour})
	require.NoError(t, err)
	defer app.Close()
	url := "redis://" + srv.Addr + "/0/jobs"

	_, err = app.Enqueue(ctx, []byte("often"), queue.WithID("often"))
	require.NoError(t, err)
	for range 12 {
		m, err := app.TryDequeue()
		require.NoError(t, err)
		require.NoError(t, m.Nack(0))
	}
	var m struct {
		Receipt    string `json:"receipt"`
		ID         string `json:"id"`
		Deliveries int    `json:"deliveries"`
	}
	require.NoError(t, json.Unmarshal([]byte(run(t, 0, "", "dequeue", "--json", url).stdout), &m))
	require.Equal(t, "often", m.ID)
	require.Equal(t, 13, m.Deliveries)
	require.Equal(t, "nacked\n", run(t, 0, "", "nack", url, m.Receipt).stdout)
	st, err := app.StatsContext(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(1), st.Ready, "13 deliveries are under the application's limit")
	require.Zero(t, st.Dead)

	got, err := app.TryDequeue()
	require.NoError(t, err)
	require.Equal(t, 14, got.Deliveries)
	run(t, 0, "", "ack", "--id", "often", url)
	_, err = app.Enqueue(ctx, []byte("again"), queue.WithID("often"))
	require.ErrorIs(t, err, queue.ErrDuplicate, "acked within the application's window")

	_, err = app.Enqueue(ctx, []byte("once"), queue.WithID("once"))
	require.NoError(t, err)
	got, err = app.TryDequeue()
	require.NoError(t, err)
	require.NoError(t, got.Ack())
	r := run(t, 6, "", "enqueue", "--id", "once", url, "again")
	require.Contains(t, r.stderr, "duplicate")
}

// TestInspectCommandsChangeNothing: stats, dlq list and dlq show only
// read. Run on a queue shared with a live application whose
// MaxDeliveries is 1, past the deadline of its lease and the due time of
// its delayed message, they leave every key of the queue as it was (no
// lease ended, nothing promoted, no counter moved), so that the
// application's own expiry dead-letters the message at its limit.
func TestInspectCommandsChangeNothing(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	rdb := srv.Client()
	clock := queuetest.NewClock() // the application's time stands still; the commands' is now, later
	app, err := redisq.Open(ctx, rdb, "jobs", &redisq.Options{MaxDeliveries: 1, ManualRequeue: true,
		AckTimeout: time.Second, Clock: clock})
	require.NoError(t, err)
	defer app.Close()
	url := "redis://" + srv.Addr + "/0/jobs"
	for _, id := range []string{"poison", "once"} {
		_, err = app.Enqueue(ctx, []byte(id), queue.WithID(id))
		require.NoError(t, err)
		m, err := app.TryDequeue()
		require.NoError(t, err)
		if id == "poison" {
			require.NoError(t, m.Nack(0), "dead at the application's limit")
		}
	}
	_, err = app.Enqueue(ctx, []byte("later"), queue.WithID("later"), queue.WithDelay(time.Hour))
	require.NoError(t, err)

	before := queueContents(t, rdb, "walq:{jobs}:*")
	run(t, 0, "", "stats", url)
	run(t, 0, "", "stats", "--json", url)
	require.Contains(t, run(t, 0, "", "dlq", "list", url).stdout, "poison")
	run(t, 0, "", "dlq", "list", "--json", url)
	require.Contains(t, run(t, 0, "", "dlq", "show", url, "poison").stdout, "poison")
	run(t, 0, "", "dlq", "show", "--json", url, "poison")
	require.Equal(t, before, queueContents(t, rdb, "walq:{jobs}:*"), "the commands that only read changed the queue")

	clock.Advance(2 * time.Second)
	n, err := app.RequeueExpired()
	require.NoError(t, err)
	require.Equal(t, 1, n)
	dead, err := app.DeadLetters(0, 10)
	require.NoError(t, err)
	require.Len(t, dead, 2)
	require.Equal(t, "once", dead[1].ID)
	require.Equal(t, "1 deliveries; last: ack timeout", dead[1].Reason)
}

// queueContents returns what every key matching pattern holds (a string, a
// hash or a sorted set; the encoding and order of a hash, which a read
// may rehash, aside).
func queueContents(t *testing.T, rdb *redis.Client, pattern string) map[string]any {
	t.Helper()
	ctx := context.Background()
	keys, err := rdb.Keys(ctx, pattern).Result()
	require.NoError(t, err)
	require.NotEmpty(t, keys)
	m := make(map[string]any, len(keys))
	for _, k := range keys {
		typ, err := rdb.Type(ctx, k).Result()
		require.NoError(t, err)
		switch typ {
		case "string":
			m[k], err = rdb.Get(ctx, k).Result()
		case "hash":
			m[k], err = rdb.HGetAll(ctx, k).Result()
		case "zset":
			m[k], err = rdb.ZRangeWithScores(ctx, k, 0, -1).Result()
		default:
			t.Fatalf("key %s holds a %s", k, typ)
		}
		require.NoError(t, err)
	}
	return m
}

// TestInspectsReplica: stats and dlq list read a queue on a read-only
// replica, which the commands that write are refused.
func TestInspectsReplica(t *testing.T) {
	primary := redistest.Start(t)
	host, port, _ := strings.Cut(primary.Addr, ":")
	replica := redistest.Start(t, append(append([]string{}, redistest.Durable...), "--replicaof", host, port)...)
	ctx := context.Background()
	require.Eventually(t, func() bool {
		info, err := replica.Client().Info(ctx, "replication").Result()
		return err == nil && strings.Contains(info, "master_link_status:up")
	}, 10*time.Second, 20*time.Millisecond)
	app, err := redisq.Open(ctx, primary.Client(), "jobs", &redisq.Options{TrustServer: true, Replicas: 1,
		WaitTimeout: 4 * time.Second})
	require.NoError(t, err)
	defer app.Close()
	for _, id := range []string{"poison", "ready"} {
		_, err = app.Enqueue(ctx, []byte(id), queue.WithID(id))
		require.NoError(t, err)
	}
	m, err := app.TryDequeue()
	require.NoError(t, err)
	require.NoError(t, m.DeadLetter("bad")) // replicated by its WAIT

	url := "redis://" + replica.Addr + "/0/jobs"
	var st struct {
		Ready int64 `json:"ready"`
		Dead  int64 `json:"dead"`
	}
	require.NoError(t, json.Unmarshal([]byte(run(t, 0, "", "stats", "--json", url).stdout), &st))
	require.Equal(t, [2]int64{1, 1}, [2]int64{st.Ready, st.Dead})
	require.Contains(t, run(t, 0, "", "dlq", "list", url).stdout, "poison")
	require.Contains(t, run(t, 1, "", "dequeue", url).stderr, "replica")
}

// TestDLQSorted: dlq list, show, requeue and purge run on the dead values
// of a sorted or windowed queue named by URL, by the ids dlq list prints
// (SEQ@PUBLISHED_UNIX_NS), as on a directory's; list and show change
// nothing.
func TestDLQSorted(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	s, err := redisq.OpenSorted[string](ctx, srv.Client(), "events", nil)
	require.NoError(t, err)
	defer s.Close()
	w, err := redisq.OpenWindowed(ctx, srv.Client(), "windows", &redisq.WindowOptions{Window: time.Nanosecond})
	require.NoError(t, err)
	defer w.Close()
	for _, k := range []string{"a", "b", "c"} {
		require.NoError(t, s.Publish(ctx, "sort-"+k, k, []byte("payload of "+k)))
		require.NoError(t, w.Publish(ctx, k, []byte("window of "+k)))
	}
	time.Sleep(time.Millisecond)
	bs, err := s.TryPull(10)
	require.NoError(t, err)
	require.Len(t, bs, 3)
	for _, b := range bs {
		require.NoError(t, b.DeadLetter("poison "+b.Key))
	}
	wbs, err := w.TryPull(10)
	require.NoError(t, err)
	require.Len(t, wbs, 3)
	for _, b := range wbs {
		require.NoError(t, b.DeadLetter("late "+b.Key))
	}

	url := "redis://" + srv.Addr + "/0/events"
	before := queueContents(t, srv.Client(), "walq:{events}:*")
	var ids []string
	for _, line := range strings.Split(strings.TrimSpace(run(t, 0, "", "dlq", "list", "--json", url).stdout), "\n") {
		var d struct {
			ID, Key, Sort, Reason, Payload string
		}
		require.NoError(t, json.Unmarshal([]byte(line), &d))
		require.Equal(t, "sort-"+d.Key, d.Sort)
		require.Equal(t, "poison "+d.Key, d.Reason)
		require.Equal(t, "payload of "+d.Key, d.Payload)
		ids = append(ids, d.ID)
	}
	require.Len(t, ids, 3)
	require.Contains(t, run(t, 0, "", "dlq", "show", url, ids[1]).stdout, "payload of b")
	require.Equal(t, before, queueContents(t, srv.Client(), "walq:{events}:*"), "dlq list and show changed the queue")

	require.Equal(t, "requeued "+ids[0]+"\n", run(t, 0, "", "dlq", "requeue", url, ids[0]).stdout)
	run(t, 5, "", "dlq", "requeue", url, ids[0]) // pending now, not dead
	require.Equal(t, "purged "+ids[1]+"\n", run(t, 0, "", "dlq", "purge", url, ids[1]).stdout)
	require.Equal(t, "purged 1 dead value\n", run(t, 0, "", "dlq", "purge", "--all", url).stdout)
	st := s.Stats()
	require.Equal(t, [2]int{0, 1}, [2]int{st.SortedDead, st.SortedPending})
	bs, err = s.TryPull(10)
	require.NoError(t, err)
	require.Equal(t, "a", bs[0].Key)

	wurl := "redis://" + srv.Addr + "/0/windows"
	require.Contains(t, run(t, 0, "", "dlq", "list", wurl).stdout, "late b")
	require.Equal(t, "requeued 3 dead values\n", run(t, 0, "", "dlq", "requeue", "--all", wurl).stdout)
	require.Equal(t, 3, w.Stats().SortedPending)
}

// TestWritingCommandsEndNoLease: the commands that change a queue opened
// a handle whose housekeeper ended the application's expired leases with
// no delivery limit, so that a message at the application's limit went
// back to ready instead of to the dead-letter set. Run on a queue shared
// with a live application whose MaxDeliveries is 1, past the deadline of
// its lease, they now change what they are asked and leave that lease as
// it was, so that the application's expiry dead-letters the message.
func TestWritingCommandsEndNoLease(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	rdb := srv.Client()
	clock := queuetest.NewClock() // the application's time stands still; the commands' is now, later
	app, err := redisq.Open(ctx, rdb, "jobs", &redisq.Options{MaxDeliveries: 1, ManualRequeue: true,
		AckTimeout: time.Second, Clock: clock})
	require.NoError(t, err)
	defer app.Close()
	url := "redis://" + srv.Addr + "/0/jobs"
	for _, id := range []string{"once", "poison-1", "poison-2"} {
		_, err = app.Enqueue(ctx, []byte(id), queue.WithID(id))
		require.NoError(t, err)
		m, err := app.TryDequeue()
		require.NoError(t, err)
		require.Equal(t, id, m.ID)
		if id != "once" {
			require.NoError(t, m.Nack(0), "dead at the application's limit")
		}
	}
	const leases = "walq:{jobs}:2:lease"
	before, err := rdb.ZScore(ctx, leases, "1").Result() // the deadline of the lease of once, seq 1
	require.NoError(t, err)

	var m struct {
		Receipt string `json:"receipt"`
		ID      string `json:"id"`
	}
	steps := []func(){
		func() { run(t, 0, "", "enqueue", "--id", "op-1", url, "x") },
		func() {
			require.NoError(t, json.Unmarshal([]byte(run(t, 0, "", "dequeue", "--json", url).stdout), &m))
			require.Equal(t, "op-1", m.ID)
		},
		func() { run(t, 0, "", "nack", url, m.Receipt) },
		func() { require.Contains(t, run(t, 0, "", "dequeue", url).stdout, "id: op-1\n") },
		func() { run(t, 0, "", "extend", "--id", "op-1", url) },
		func() { run(t, 0, "", "ack", "--id", "op-1", url) },
		func() { run(t, 0, "", "dlq", "requeue", url, "poison-1") },
		func() { run(t, 0, "", "dlq", "purge", url, "poison-2") },
	}
	for i, step := range steps {
		step()
		now, err := rdb.ZScore(ctx, leases, "1").Result()
		require.NoError(t, err, "step %d ended the application's lease", i+1)
		require.Equal(t, before, now, "step %d changed the application's lease", i+1)
	}

	clock.Advance(2 * time.Second)
	n, err := app.RequeueExpired()
	require.NoError(t, err)
	require.Equal(t, 1, n)
	dead, err := app.DeadLetters(0, 10)
	require.NoError(t, err)
	require.Len(t, dead, 1)
	require.Equal(t, "once", dead[0].ID)
	require.Equal(t, "1 deliveries; last: ack timeout", dead[0].Reason)
}

// TestReaderRefusedAChangeSaysWhy: a user whose ACL lets it only read the
// queue was refused a command that changes it with the server's bare
// NOPERM. The refusal now says what a change needs and that the
// commands that only read serve such a user, as they do.
func TestReaderRefusedAChangeSaysWhy(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	app, err := redisq.Open(ctx, srv.Client(), "jobs", &redisq.Options{TrustServer: true}) // loads the library
	require.NoError(t, err)
	defer app.Close()
	_, err = app.Enqueue(ctx, []byte("x"))
	require.NoError(t, err)
	require.NoError(t, srv.Client().Do(ctx, "ACL", "SETUSER", "reader", "on", ">pw", "resetkeys", "%R~walq:{jobs}*",
		"&*", "+@read", "+@connection", "+fcall_ro", "+function|list", "+subscribe").Err())
	url := "redis://reader:pw@" + srv.Addr + "/0/jobs"

	for _, args := range [][]string{{"enqueue", url, "y"}, {"dequeue", url}, {"dlq", "purge", "--all", url}} {
		r := run(t, 1, "", args...)
		require.Contains(t, r.stderr, "NOPERM", "walq-redis %v", args)
		require.Contains(t, r.stderr, "stats, dlq list and dlq show only read", "walq-redis %v", args)
	}
	require.Contains(t, run(t, 0, "", "stats", url).stdout, "enqueued 1")
	run(t, 0, "", "dlq", "list", url)
}

// TestReaderRefusedASortedChangeSaysWhy: as TestReaderRefusedAChangeSaysWhy,
// on a sorted queue, whose refusal only said that the server's
// configuration could not be read, with no word on what to grant.
func TestReaderRefusedASortedChangeSaysWhy(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	s, err := redisq.OpenSorted[string](ctx, srv.Client(), "events", &redisq.SortedOptions{Options: redisq.Options{TrustServer: true}})
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.Publish(ctx, "a", "k", []byte("x")))
	bs, err := s.TryPull(1)
	require.NoError(t, err)
	require.NoError(t, bs[0].DeadLetter("why"))
	require.NoError(t, srv.Client().Do(ctx, "ACL", "SETUSER", "reader", "on", ">pw", "resetkeys", "%R~walq:{events}*",
		"&*", "+@read", "+@connection", "+fcall_ro", "+function|list", "+subscribe").Err())
	url := "redis://reader:pw@" + srv.Addr + "/0/events"
	run(t, 0, "", "dlq", "list", url)
	for _, args := range [][]string{{"dlq", "purge", "--all", url}, {"dlq", "requeue", "--all", url}} {
		r := run(t, 1, "", args...)
		require.Contains(t, r.stderr, "NOPERM", "walq-redis %v", args)
		require.Contains(t, r.stderr, "stats, dlq list and dlq show only read", "walq-redis %v", args)
	}
	d, err := s.DeadValues(0, 10)
	require.NoError(t, err)
	require.Len(t, d, 1, "the dead value is left")
}

// TestRequeueExpired: the writing commands end no lease (the
// application's handles do, at its MaxDeliveries), so with no application
// handle open, the lease of a 'walq-redis dequeue' never acked lasted for
// good: the message was never delivered again. requeue-expired ends the
// leases that ran out: ready again, or, with --max-deliveries, dead at
// that limit, which the line says it does not count apart.
func TestRequeueExpired(t *testing.T) {
	srv := redistest.Start(t)
	url := "redis://" + srv.Addr + "/0/jobs"
	run(t, 0, "", "enqueue", url, "x")
	run(t, 0, "", "dequeue", "--ack-timeout", "1ms", url)
	run(t, 4, "", "dequeue", url) // its lease ran out; no command ends it
	require.Contains(t, run(t, 0, "", "stats", url).stdout, "in flight   1")

	require.Equal(t, "ended 1 lease\n", run(t, 0, "", "requeue-expired", url).stdout)
	require.Contains(t, run(t, 0, "", "dequeue", "--ack-timeout", "1ms", url).stdout, "delivery: 2\n")
	require.Equal(t, "ended 1 lease, back to ready or, at 2 deliveries, to the dead set (the count does not split them)\n",
		run(t, 0, "", "requeue-expired", "--max-deliveries", "2", url).stdout)
	st := run(t, 0, "", "stats", url).stdout
	require.Contains(t, st, "in flight   0")
	require.Contains(t, st, "dead        1")
	require.Equal(t, "ended 0 leases\n", run(t, 0, "", "requeue-expired", url).stdout)
	run(t, 1, "", "requeue-expired", "--max-deliveries", "-1", url)
}

// walq-redis printed a queue's URL as given, password and all: stats on
// stdout, and the errors of a URL that names no queue, that go-redis could
// not parse (url.Parse's error quotes the URL, and its "invalid port"
// quotes the start of a password with a raw '/' in it), and of a sorted
// queue refused. Every URL is now shown with its password replaced by
// xxxxx, and a URL that does not parse is not quoted at all.
func TestPasswordNotShown(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	require.NoError(t, srv.Client().Do(ctx, "ACL", "SETUSER", "app", "on", ">S3CRET", "allkeys", "allchannels", "allcommands").Err())
	s, err := redisq.OpenSorted[int64](ctx, srv.Client(), "events", nil)
	require.NoError(t, err)
	defer s.Close()
	at := "redis://app:S3CRET@" + srv.Addr
	cases := []struct {
		name string
		code int
		args []string
	}{
		{"stats", 0, []string{"stats", at + "/0/jobs"}},
		{"stats json", 0, []string{"stats", "--json", at + "/0/jobs"}},
		{"stats sorted", 0, []string{"stats", at + "/0/events"}},
		{"sorted refused", 1, []string{"enqueue", at + "/0/events", "x"}},
		{"no queue", 1, []string{"enqueue", at, "x"}},
		{"bad name", 1, []string{"enqueue", at + "/0/a%zz", "x"}},
		{"fragment", 1, []string{"enqueue", "redis://app:S3C#RET@" + srv.Addr + "/0/jobs", "x"}},
		{"raw slash", 1, []string{"enqueue", "redis://app:S3C/RET@" + srv.Addr + "/0/jobs", "x"}},
		{"raw at", 1, []string{"enqueue", "redis://app:S3C@RET@" + srv.Addr + "/0/jobs", "x"}},
		{"digits, raw slash", 1, []string{"enqueue", "redis://app:12/S3CRET@" + srv.Addr + "/0/jobs", "x"}},
		{"digits, raw question mark", 1, []string{"enqueue", "redis://app:12?S3CRET@" + srv.Addr + "/0/jobs", "x"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := run(t, c.code, "", c.args...)
			shown := r.stdout + r.stderr
			require.NotContains(t, shown, "S3C")
			require.Contains(t, shown, "app:xxxxx@", "the URL is shown, its password redacted")
		})
	}
}

// TestRetriesInURL: a URL whose max_retries makes go-redis send a command
// again after its connection dropped (above 0, or 0, go-redis's default
// of 3) is refused for a command that changes the queue, with what the
// user can do in the URL (drop max_retries, or give -1), not an option
// walq-redis has no flag for; -1 and a command that only reads run.
func TestRetriesInURL(t *testing.T) {
	srv := redistest.Start(t)
	base := "redis://" + srv.Addr + "/0/jobs"
	for _, q := range []string{"?max_retries=2", "?max_retries=0"} {
		r := run(t, 1, "", "enqueue", base+q, "x")
		require.Contains(t, r.stderr, "max_retries", q)
		require.Contains(t, r.stderr, "max_retries=-1", q)
		require.NotContains(t, r.stderr, "AcceptDoubleRuns", q)
		run(t, 0, "", "stats", base+q)
	}
	run(t, 0, "", "enqueue", base+"?max_retries=-1", "x")
	var st struct {
		Ready int64 `json:"ready"`
	}
	require.NoError(t, json.Unmarshal([]byte(run(t, 0, "", "stats", "--json", base).stdout), &st))
	require.Equal(t, int64(1), st.Ready, "only the enqueue of max_retries=-1 ran")
}
