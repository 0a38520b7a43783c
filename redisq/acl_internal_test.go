package redisq

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/redisq/internal/redistest"
)

// aclCommands are the commands doc.go says a server with ACLs must let the
// client's user run: those of Open and the handles, and every one the
// libraries' functions run (Redis checks a script's commands too).
var aclCommands = []string{
	"HELLO", "FCALL", "FUNCTION|LOAD", "FUNCTION|LIST", "SUBSCRIBE", "PING", "HGET", "HSETNX",
	"DECR", "GET", "HDEL", "HGETALL", "HINCRBY", "HMGET", "HSET", "INCR", "INCRBY", "PUBLISH",
	"ZADD", "ZCARD", "ZCOUNT", "ZMSCORE", "ZPOPMIN", "ZRANGE", "ZRANGEBYLEX", "ZRANGEBYSCORE", "ZREM", "ZSCORE",
}

// aclUser makes the user app with the given rules and returns a client
// logged in as it.
func aclUser(t *testing.T, srv *redistest.Server, rules ...string) *redis.Client {
	t.Helper()
	admin := srv.Client()
	ctx := context.Background()
	require.NoError(t, admin.Do(ctx, "ACL", "DELUSER", "app").Err())
	args := []any{"ACL", "SETUSER", "app", "reset", "on", ">pw", "~*", "&*"}
	for _, r := range rules {
		args = append(args, r)
	}
	require.NoError(t, admin.Do(ctx, args...).Err())
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1, Username: "app", Password: "pw"})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestACLWithoutType: a user that may not run TYPE (a user set up by
// command category, say +@all -@keyspace) ran the queue before the
// scripts checked key types; it must still, and no refusal may lose a
// message: every enqueued message is leased, acked and counted.
func TestACLWithoutType(t *testing.T) {
	srv := redistest.Start(t)
	rdb := aclUser(t, srv, "+@all", "-type")
	aclRun(t, rdb, "notype")
}

// TestACLWithoutKeyspace: the same for a user without the keyspace
// commands (EXISTS, TYPE, DEL...), which Open and the scripts need not.
func TestACLWithoutKeyspace(t *testing.T) {
	srv := redistest.Start(t)
	rdb := aclUser(t, srv, "+@all", "-@keyspace")
	aclRun(t, rdb, "nokeyspace")
}

// TestACLDocumented: a user allowed exactly the commands doc.go lists
// (and the connection's own) runs both kinds of queue end to end.
func TestACLDocumented(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	require.NoError(t, err)
	text := string(doc)
	from := strings.Index(text, "// A server with ACLs")
	require.GreaterOrEqual(t, from, 0, "doc.go has its ACL note")
	note := text[from:]
	note = strings.ReplaceAll(note[:strings.Index(note, "\n//\n")], "\n//", "") // the paragraph
	var rules []string
	for _, c := range aclCommands {
		word := regexp.MustCompile(`(^|[^A-Z])` + strings.ReplaceAll(c, "|", " ") + `($|[^A-Z])`)
		require.True(t, word.MatchString(note), "doc.go's ACL note lacks %s", c)
		rules = append(rules, "+"+strings.ToLower(c))
	}
	srv := redistest.Start(t)
	rdb := aclUser(t, srv, rules...)
	require.ErrorContains(t, rdb.Del(context.Background(), "x").Err(), "NOPERM") // the ACL holds
	aclRun(t, rdb, "documented")
}

// aclFunctionCommands are the commands of aclCommands that the
// libraries' functions run, which Redis checks against the ACL only when
// a function runs them.
var aclFunctionCommands = []string{
	"DECR", "GET", "HDEL", "HGET", "HGETALL", "HINCRBY", "HMGET", "HSET", "INCR", "INCRBY", "PUBLISH",
	"ZADD", "ZCARD", "ZCOUNT", "ZMSCORE", "ZPOPMIN", "ZRANGE", "ZRANGEBYLEX", "ZRANGEBYSCORE", "ZREM", "ZSCORE",
}

// TestACLRefusedCommand: a user refused one command that the functions
// run (Redis checks it only when a function runs it, which may be after
// the function's first write: a pop, a burial) either is refused by Open,
// with an error naming the command, or runs the queue whole: every call
// works and nothing is lost.
func TestACLRefusedCommand(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	opts := Options{TrustServer: true, AckTimeout: time.Minute, DedupWindow: time.Hour}
	for _, c := range aclFunctionCommands {
		t.Run(c, func(t *testing.T) {
			rdb := aclUser(t, srv, "+@all", "-"+strings.ToLower(c))
			name := "acl-refused-" + strings.ToLower(c)
			q, err := Open(ctx, rdb, name, &opts)
			if err != nil {
				t.Log(err)
				require.Regexp(t, `(?i)\b`+c+`\b`, err.Error(), "ack queue")
			} else {
				q.Close()
				aclRunAck(t, rdb, name)
			}
			s, err := OpenSorted[string](ctx, rdb, "sorted-"+name, &SortedOptions{Options: opts})
			if err != nil {
				t.Log(err)
				require.Regexp(t, `(?i)\b`+c+`\b`, err.Error(), "sorted queue")
			} else {
				s.Close()
				aclRunSorted(t, rdb, "sorted-"+name)
			}
		})
	}
}

// aclRun runs every kind of call of both queues through rdb, and checks
// that nothing is lost.
func aclRun(t *testing.T, rdb *redis.Client, name string) {
	aclRunAck(t, rdb, "acl-"+name)
	aclRunSorted(t, rdb, "acl-sorted-"+name)
}

// aclRunAck runs every kind of call of the ack queue name through rdb,
// and checks that nothing is lost.
func aclRunAck(t *testing.T, rdb *redis.Client, name string) {
	t.Helper()
	ctx := context.Background()
	opts := Options{TrustServer: true, AckTimeout: time.Minute, DedupWindow: time.Hour}
	q, err := Open(ctx, rdb, name, &opts)
	require.NoError(t, err)
	defer q.Close()
	for _, id := range []string{"a", "b", "c"} {
		_, err := q.Enqueue(ctx, []byte("p-"+id), queue.WithID(id))
		require.NoError(t, err)
	}
	_, err = q.Enqueue(ctx, []byte("p-late"), queue.WithDelay(time.Millisecond))
	require.NoError(t, err)
	_, err = q.EnqueueBatch(ctx, []queue.Item{{Payload: []byte("p-d")}, {Payload: []byte("p-e")}})
	require.NoError(t, err)
	for range 3 {
		m, err := q.TryDequeue()
		require.NoError(t, err, "lone dequeue")
		require.NoError(t, m.Ack())
	}
	time.Sleep(5 * time.Millisecond) // "late" is due
	ms, err := q.DequeueBatch(ctx, 2)
	require.NoError(t, err, "batch dequeue")
	require.Len(t, ms, 2)
	require.NoError(t, ms[0].Nack(0))
	require.NoError(t, ms[1].DeadLetter("kept dead"))
	ms, err = q.DequeueBatch(ctx, 10)
	require.NoError(t, err)
	require.Len(t, ms, 2)
	for _, m := range ms {
		require.NoError(t, m.Ack())
	}
	n, err := q.RequeueAllDead()
	require.NoError(t, err)
	require.Equal(t, 1, n)
	m, err := q.TryDequeue()
	require.NoError(t, err)
	require.NoError(t, m.Ack())
	st, err := q.StatsContext(ctx)
	require.NoError(t, err)
	require.Equal(t, [4]int64{0, 0, 0, 0}, [4]int64{st.Ready, st.Delayed, st.InFlight, st.Dead})
	require.Equal(t, uint64(6), st.Acked)
}

// aclRunSorted runs every kind of call of the sorted queue name through
// rdb, and checks that nothing is lost.
func aclRunSorted(t *testing.T, rdb *redis.Client, name string) {
	t.Helper()
	ctx := context.Background()
	opts := Options{TrustServer: true, AckTimeout: time.Minute}
	s, err := OpenSorted[string](ctx, rdb, name, &SortedOptions{Options: opts})
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.Publish(ctx, "x", "k1", []byte("v1")))
	require.NoError(t, s.Publish(ctx, "y", "k1", []byte("v2")))
	require.NoError(t, s.Publish(ctx, "x", "k2", []byte("v3")))
	bs, err := s.TryPull(10)
	require.NoError(t, err, "pull")
	require.Len(t, bs, 2)
	require.NoError(t, s.Nack(bs[0].Receipt, 0))
	require.NoError(t, s.Ack(bs[1].Receipt))
	bs, err = s.TryPull(10)
	require.NoError(t, err)
	require.Len(t, bs, 1)
	require.NoError(t, s.Ack(bs[0].Receipt))
	sst, err := s.StatsContext(ctx)
	require.NoError(t, err)
	require.Equal(t, [3]int{0, 0, 0}, [3]int{sst.SortedPending, sst.SortedBatches, sst.SortedLeased})
	require.Equal(t, uint64(3), sst.Published)
}

// TestACLWithoutTypeWrongKey: a user that may not run TYPE still has a
// key of the wrong type fail the call before it writes: an enqueue with
// an id over a ready key overwritten by hand fails without keeping its
// id, so its retry, once the key is restored, enqueues the message.
func TestACLWithoutTypeWrongKey(t *testing.T) {
	srv := redistest.Start(t)
	admin := srv.Client()
	rdb := aclUser(t, srv, "+@all", "-type")
	ctx := context.Background()
	q, err := Open(ctx, rdb, "acl-notype-wrong", &Options{TrustServer: true, DedupWindow: time.Hour})
	require.NoError(t, err)
	defer q.Close()
	_, err = q.Enqueue(ctx, []byte("p-z"), queue.WithID("z"))
	require.NoError(t, err)
	key := q.keys[2]
	saved, err := admin.Dump(ctx, key).Result()
	require.NoError(t, err)
	require.NoError(t, admin.Set(ctx, key, "x", 0).Err())
	_, err = q.Enqueue(ctx, []byte("p-a"), queue.WithID("a"))
	require.ErrorContains(t, err, key)
	require.NoError(t, admin.Del(ctx, key).Err())
	require.NoError(t, admin.Restore(ctx, key, 0, saved).Err())
	_, err = q.Enqueue(ctx, []byte("p-a"), queue.WithID("a"))
	require.NoError(t, err, "the failed enqueue kept no id")
	var got []string
	for {
		m, err := q.TryDequeue()
		if err != nil {
			require.ErrorIs(t, err, queue.ErrEmpty)
			break
		}
		got = append(got, m.ID)
	}
	require.Equal(t, []string{"z", "a"}, got)
}

// TestACLProbeChangesNothing: the check of the ACL that Open runs tries
// every command the functions run on the queue's own keys; it leaves
// every key of a queue in use as it was.
func TestACLProbeChangesNothing(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	opts := Options{TrustServer: true, AckTimeout: time.Minute, DedupWindow: time.Hour, MaxDeliveries: 5}
	q, err := Open(ctx, rdb, "probe", &opts)
	require.NoError(t, err)
	defer q.Close()
	for _, id := range []string{"a", "b", "c", "d", "e"} {
		_, err := q.Enqueue(ctx, []byte("p-"+id), queue.WithID(id))
		require.NoError(t, err)
	}
	_, err = q.Enqueue(ctx, []byte("late"), queue.WithDelay(time.Hour))
	require.NoError(t, err)
	ms, err := q.DequeueBatch(ctx, 3)
	require.NoError(t, err)
	require.NoError(t, ms[0].Ack())
	require.NoError(t, ms[1].DeadLetter("dead"))

	s, err := OpenSorted[string](ctx, rdb, "probe-sorted", &SortedOptions{Options: opts})
	require.NoError(t, err)
	defer s.Close()
	for i, k := range []string{"k1", "k1", "k2", "k3"} {
		require.NoError(t, s.Publish(ctx, strconv.Itoa(i), k, []byte("v")))
	}
	bs, err := s.TryPull(1)
	require.NoError(t, err)
	require.NoError(t, s.Nack(bs[0].Receipt, time.Hour))
	_, err = s.TryPull(1)
	require.NoError(t, err)

	keys := append(append([]string{}, q.keys...), s.keys...)
	before := keyContents(t, rdb, keys)
	q2, err := Open(ctx, rdb, "probe", &opts)
	require.NoError(t, err)
	require.NoError(t, q2.Close())
	s2, err := OpenSorted[string](ctx, rdb, "probe-sorted", &SortedOptions{Options: opts})
	require.NoError(t, err)
	require.NoError(t, s2.Close())
	after := keyContents(t, rdb, keys)
	require.Equal(t, before, after)
	require.NotContains(t, fmt.Sprint(after), "walq-probe", "the probe's field or member is left") // by any Open
}

// keyContents reads every key of keys whole, by its type.
func keyContents(t *testing.T, rdb *redis.Client, keys []string) map[string]any {
	t.Helper()
	ctx := context.Background()
	out := map[string]any{}
	for _, k := range keys {
		typ, err := rdb.Type(ctx, k).Result()
		require.NoError(t, err)
		var v any
		switch typ {
		case "string":
			v, err = rdb.Get(ctx, k).Result()
		case "hash":
			v, err = rdb.HGetAll(ctx, k).Result()
		case "zset":
			v, err = rdb.ZRangeWithScores(ctx, k, 0, -1).Result()
		case "none":
		default:
			t.Fatalf("key %s of type %s", k, typ)
		}
		require.NoError(t, err)
		out[k] = v
	}
	return out
}

// TestACLKeyPatterns: the check of the ACL tries each command on the
// queue's own keys, so a user allowed exactly one queue's keys opens and
// runs it; one refused writes to one key of it is refused by Open (the
// probe's FCALL declares each key of the queue, for reading and writing,
// so the server refuses it before the function runs).
func TestACLKeyPatterns(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	rdb := aclUser(t, srv, "+@all", "resetkeys", "~walq:{keys-ok}:*", "~walq:{keys-sorted-ok}:*")
	aclRunAck(t, rdb, "keys-ok")
	aclRunSorted(t, rdb, "keys-sorted-ok")

	rules := []string{"+@all", "resetkeys", "%R~walq:{keys-ro}:2:dead", "~walq:{keys-ro}:[a-z]*"} // and layout 1's, which Open reads
	for _, k := range []string{"seq", "msg", "ready", "delayed", "lease", "acked", "stats"} {
		rules = append(rules, "~walq:{keys-ro}:2:"+k)
	}
	rdb = aclUser(t, srv, rules...)
	_, err := Open(ctx, rdb, "keys-ro", &Options{TrustServer: true})
	require.ErrorContains(t, err, "NOPERM")
}

// TestACLReadOnlyUser: a user granted only reads and FCALL is refused a
// handle that may write, naming a write command the user lacks; one
// granted only reads (and the commands that open a queue and call its
// functions: FCALL_RO, not FCALL) opens a ReadOnly handle and reads the
// queue.
func TestACLReadOnlyUser(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	w, err := Open(ctx, srv.Client(), "acl-reader", &Options{TrustServer: true})
	require.NoError(t, err)
	defer w.Close()
	_, err = w.Enqueue(ctx, []byte("x"))
	require.NoError(t, err)

	rdb := aclUser(t, srv, "+@read", "+@connection", "+fcall", "+function|list", "+subscribe")
	_, err = Open(ctx, rdb, "acl-reader", &Options{TrustServer: true})
	require.ErrorIs(t, err, queue.ErrInvalidOptions)

	rdb = aclUser(t, srv, "+@read", "+@connection", "+fcall_ro", "+function|list", "+subscribe")
	require.ErrorContains(t, rdb.Set(ctx, "x", "1", 0).Err(), "NOPERM") // the ACL holds
	r, err := Open(ctx, rdb, "acl-reader", &Options{ReadOnly: true, TrustServer: true})
	require.NoError(t, err)
	defer r.Close()
	st, err := r.StatsContext(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 1, st.Ready)
	_, err = r.DeadLetters(0, 10)
	require.NoError(t, err)
}

// TestACLReadOnlyKeyPattern: a user granted the queue's keys for reading
// only (%R~) opens a ReadOnly handle and reads the queue's counts and
// dead letters; the grant refuses writes to those keys.
func TestACLReadOnlyKeyPattern(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	w, err := Open(ctx, srv.Client(), "ro-keys", &Options{TrustServer: true})
	require.NoError(t, err)
	defer w.Close()
	_, err = w.Enqueue(ctx, []byte("x"))
	require.NoError(t, err)

	rdb := aclUser(t, srv, "+@all", "resetkeys", "%R~walq:{ro-keys}*")
	require.ErrorContains(t, rdb.Do(ctx, "HSET", "walq:{ro-keys}:2:msg", "x", "1").Err(), "NOPERM") // the ACL holds
	r, err := Open(ctx, rdb, "ro-keys", &Options{ReadOnly: true, TrustServer: true})
	require.NoError(t, err)
	defer r.Close()
	st, err := r.StatsContext(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 1, st.Ready)
	_, err = r.DeadLetters(0, 10)
	require.NoError(t, err)

	_, err = Open(ctx, rdb, "ro-keys", &Options{TrustServer: true})
	require.ErrorContains(t, err, "NOPERM", "a handle that may write is refused")
}

// TestACLReadOnlySortedKeyPattern is TestACLReadOnlyKeyPattern for a
// sorted queue: a user granted its keys for reading only opens a
// ReadOnly handle and reads its counts and dead values.
func TestACLReadOnlySortedKeyPattern(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	w, err := OpenSorted[int64](ctx, srv.Client(), "ro-sorted-keys", &SortedOptions{Options: Options{TrustServer: true}})
	require.NoError(t, err)
	defer w.Close()
	require.NoError(t, w.Publish(ctx, 1, "k", []byte("x")))
	bs, err := w.TryPull(1)
	require.NoError(t, err)
	require.NoError(t, bs[0].DeadLetter("why"))

	rdb := aclUser(t, srv, "+@all", "resetkeys", "%R~walq:{ro-sorted-keys}*")
	r, err := OpenSorted[int64](ctx, rdb, "ro-sorted-keys", &SortedOptions{Options: Options{ReadOnly: true, TrustServer: true}})
	require.NoError(t, err)
	defer r.Close()
	st, err := r.StatsContext(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, st.SortedDead)
	ds, err := r.DeadValues(0, 0)
	require.NoError(t, err)
	require.Len(t, ds, 1)
	require.Equal(t, "k", ds[0].Key)

	_, err = OpenSorted[int64](ctx, rdb, "ro-sorted-keys", &SortedOptions{Options: Options{TrustServer: true}})
	require.ErrorContains(t, err, "NOPERM", "a handle that may write is refused")
}

// TestACLReaderRefusedAWriterSaysWhatToGrant: a user granted the queue for
// reading only (no FCALL, or the keys by a read-only pattern) opening a
// handle that writes was refused with the server's bare NOPERM from the
// check that the server takes writes. Open refuses it as invalid options,
// saying what to grant and that a ReadOnly handle reads the queue.
func TestACLReaderRefusedAWriterSaysWhatToGrant(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	q, err := Open(ctx, srv.Client(), "lib", &Options{TrustServer: true}) // loads the libraries, which a reader cannot
	require.NoError(t, err)
	require.NoError(t, q.Close())
	s, err := OpenSorted[string](ctx, srv.Client(), "slib", &SortedOptions{Options: Options{TrustServer: true}})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	for _, c := range []struct {
		name  string
		rules []string
	}{
		{"no FCALL", []string{"+@read", "+@connection", "+fcall_ro", "+function|list", "+subscribe"}},
		{"keys for reading", []string{"+@all", "resetkeys", "%R~walq:{ro-writer}*"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			rdb := aclUser(t, srv, c.rules...)
			_, err := Open(ctx, rdb, "ro-writer", &Options{TrustServer: true})
			require.ErrorIs(t, err, queue.ErrInvalidOptions)
			require.ErrorContains(t, err, "NOPERM")
			require.ErrorContains(t, err, "walq:{ro-writer}*")
			require.ErrorContains(t, err, "Options.ReadOnly")
			_, err = OpenSorted[string](ctx, rdb, "ro-writer", &SortedOptions{Options: Options{TrustServer: true}})
			require.ErrorIs(t, err, queue.ErrInvalidOptions)
			require.ErrorContains(t, err, "walq:{ro-writer}*")
		})
	}
}
