package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/url"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/walq/walq/internal/cli"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/redisq"
)

// engine opens the queues that redis:// and rediss:// URLs name.
type engine struct{}

var _ cli.SortedEngine = engine{}

func (engine) Owns(target string) bool {
	return strings.HasPrefix(target, "redis://") || strings.HasPrefix(target, "rediss://")
}

// splitTarget splits a queue URL into the server's URL and the queue name,
// its last path element, %-unescaped: a name with a '/' in it is written
// with %2F, a '?' as %3F, and a literal '%' as %25. A query after the name
// (?protocol=3, ?dial_timeout=5s) is the server's: it goes to the
// server's URL, whose parser refuses an option it does not know. A raw
// '#' is refused: a URL fragment names nothing on a server, and taking it
// into the name, or dropping it, would open another queue than the one
// meant. A '#' that is part of the name, the user, the password or an
// option's value is written %23.
func splitTarget(target string) (server, name string, err error) {
	if strings.Contains(target, "#") {
		return "", "", fmt.Errorf("%w: %q: a raw '#' starts a URL fragment, which names no queue: "+
			"write a '#' in the queue's name, the user, the password or an option's value as %%23", queue.ErrInvalidOptions, cli.Redacted(target))
	}
	base, query, hasQuery := strings.Cut(target, "?")
	_, rest, _ := strings.Cut(base, "://")
	i := strings.LastIndex(base, "/")
	if !strings.Contains(rest, "/") || i == len(base)-1 {
		return "", "", fmt.Errorf("%w: %q names no queue: want %s", queue.ErrInvalidOptions, cli.Redacted(target), form)
	}
	name, err = url.PathUnescape(base[i+1:])
	if err != nil {
		return "", "", fmt.Errorf("%w: the queue name in %q: %v (a literal %% is written %%25)",
			queue.ErrInvalidOptions, cli.Redacted(target), err)
	}
	server = base[:i]
	if hasQuery {
		server += "?" + query
	}
	return server, name, nil
}

// form is the form of a queue URL, for the help and the errors.
const form = "redis://[user:password@]host:port[/db]/NAME[?OPTIONS] (NAME %-escaped: a/b is a%2Fb, a?b is a%3Fb, a#b is a%23b, a literal % is %25)"

func (engine) Form() string { return form }

// client returns a client of the server target names, and the queue's
// name.
func client(target string) (*redis.Client, string, error) {
	server, name, err := splitTarget(target)
	if err != nil {
		return nil, "", err
	}
	ro, err := redis.ParseURL(server)
	var ue *url.Error
	if errors.As(err, &ue) || (err != nil && unreadPassword(server)) {
		// url.Parse's error quotes the URL, and may quote a piece of
		// the password (an invalid port ":secret"); ParseURL's own
		// quote a path that holds the rest of a password net/url did
		// not read (redis://u:12/secret@host/0): say neither.
		return nil, "", fmt.Errorf("%w: %q is not a URL (a '/', '?', '#', '@' or '%%' in the user or the password is written %%-escaped: %%2F, %%3F, %%23, %%40, %%25)",
			queue.ErrInvalidOptions, cli.Redacted(server))
	}
	if err != nil {
		return nil, "", fmt.Errorf("%w: %v", queue.ErrInvalidOptions, err)
	}
	if !setsRetries(server) {
		// go-redis sends a command again on a new connection when the
		// last dropped; a script call may have run before it dropped, and
		// its second run would report another outcome (an id requeued,
		// then "not found"). Without max_retries in the URL, none; a
		// command that changes the queue refuses a URL that gives
		// retries (refuseRetries).
		ro.MaxRetries = -1
	}
	return redis.NewClient(ro), name, nil
}

// setsRetries reports whether the server URL sets max_retries.
func setsRetries(server string) bool {
	u, err := url.Parse(server)
	return err == nil && u.Query().Has("max_retries")
}

// refuseRetries refuses (queue.ErrInvalidOptions) a URL whose
// max_retries makes the client send a command again after its connection
// dropped (above 0; 0 is go-redis's default of 3) for a command that
// changes the queue: redisq.Open refuses such a client too, but its error
// names Options.AcceptDoubleRuns, which walq-redis has no flag for; this
// one says what to change in the URL. A command that only reads (inspect)
// opens a ReadOnly handle, which takes any client.
func refuseRetries(rdb *redis.Client, target string, inspect bool) error {
	n := rdb.Options().MaxRetries // as NewClient holds it: 0 none, the default 3
	if inspect || n <= 0 {
		return nil
	}
	return fmt.Errorf("%w: %s: max_retries gives the client %d retries (max_retries=0 means go-redis's default, 3): "+
		"a command whose connection dropped after the server ran it would run again and report the second run's "+
		"outcome (a message enqueued twice, an ack that happened failing as a lost lease); drop max_retries from the "+
		"URL, or give max_retries=-1", queue.ErrInvalidOptions, cli.Redacted(target), n)
}

// unreadPassword reports whether server parses as a URL with no
// password although cli.Redacted hides one in it: a password with a raw
// '/', '?' or '#' after digits, which net/url reads as a port.
func unreadPassword(server string) bool {
	u, err := url.Parse(server)
	return err == nil && u.User == nil && cli.Redacted(server) != server
}

func (engine) Open(ctx context.Context, target string, o cli.EngineOptions) (queue.AckQueue, error) {
	rdb, name, err := client(target)
	if err != nil {
		return nil, err
	}
	if err := refuseRetries(rdb, target, o.Inspect); err != nil {
		return nil, errors.Join(err, rdb.Close())
	}
	if err := refuseSorted(ctx, rdb, target, name); err != nil {
		return nil, errors.Join(err, rdb.Close())
	}
	q, err := redisq.Open(ctx, rdb, name, ownerOptions(o))
	if err != nil {
		return nil, errors.Join(refusedWrites(err, o.Inspect), rdb.Close())
	}
	return ownedQueue{Queue: q, rdb: rdb}, nil
}

// ownerOptions are the options of the handle a command opens. The
// application's MaxDeliveries and DedupWindow are recorded nowhere on the
// server, and a command must not apply its own in their place: it would
// dead-letter messages that the application's limit still lets through
// (at a dequeue, a nack, a lease's end that its handle returns), and
// forget the ids that the application's window still holds (an ack would
// stamp none, an enqueue would not look for them), so that a retried
// enqueue would be taken twice. So it dead-letters nothing and keeps
// every acked id (an unlimited window), as the walq tool does with a
// directory; the application's next enqueue forgets the ids its window
// has passed, and its next dequeue dead-letters a message past its
// limit. For the same reason its housekeeper ends no lease
// (ManualRequeue): a lease of the application that ran out is left for
// the application's handles to end, which dead-letter its message at
// their limit where the command's would make it ready; the housekeeper
// only makes due delayed messages ready, as any delivery does. Only the
// demo, which consumes a queue of its own, ends expired leases
// (o.Expire); requeue-expired ends them when its operator asks, at the
// limit the operator gives (o.MaxDeliveries), or none. AckTimeout is the
// lease of the command's own dequeue: a lease's deadline is stored with
// it. A command that only reads
// (o.Inspect) opens a ReadOnly handle, which starts no housekeeper: it
// ends none of the application's expired leases and makes no delayed
// message ready; and it skips the check of the server's configuration,
// which only matters for writes; so does one run with --trust-server
// (o.TrustServer), whose operator vouches for that configuration.
func ownerOptions(o cli.EngineOptions) *redisq.Options {
	maxDeliveries := -1
	if o.MaxDeliveries > 0 {
		maxDeliveries = o.MaxDeliveries
	}
	return &redisq.Options{AckTimeout: o.AckTimeout, MaxDeliveries: maxDeliveries, DedupWindow: math.MaxInt64,
		Sync: queue.SyncInterval, TrustServer: o.Inspect || o.TrustServer, ReadOnly: o.Inspect, ManualRequeue: !o.Expire}
}

// refusedWrites adds to err, the failed Open (or OpenSorted) of a handle
// that writes (not inspect) by a user whose ACL refuses a command it
// needs (NOPERM), that the commands that only read need no more than
// reads.
func refusedWrites(err error, inspect bool) error {
	var re redis.Error
	if inspect || !errors.As(err, &re) || !strings.HasPrefix(re.Error(), "NOPERM") {
		return err
	}
	return fmt.Errorf("%w; the commands that change a queue need a user that may write it, and read the server's "+
		"configuration (CONFIG GET), or --trust-server, which skips that check, on a server known to have appendonly yes "+
		"and maxmemory-policy noeviction; stats, dlq list and dlq show only read, and need the queue's keys for reading alone", err)
}

// refuseSorted refuses a name that holds a sorted or windowed queue and
// no ack queue: the commands but stats, dlq and requeue-expired (which
// open it with OpenSorted first) run on ack queues only, and would show
// it as an empty ack queue, or make one beside it. It reads the counters that
// a queue of each kind keeps for good (the seq keys, walq:{NAME}:2:seq of
// an ack queue, walq:{NAME}:seq of its first layout, walq:{NAME}:s:seq of
// a sorted one) and the sort key kind a sorted queue records when it is
// opened, with GET and HGET, which redisq.Open runs too.
func refuseSorted(ctx context.Context, rdb redis.Cmdable, target, name string) error {
	p := "walq:{" + name + "}:"
	sorted, err := exists(rdb.Get(ctx, p+"s:seq"))
	if err == nil && !sorted {
		sorted, err = exists(rdb.HGet(ctx, p+"s:stats", "kind"))
	}
	if err != nil || !sorted {
		return err
	}
	for _, k := range []string{p + "2:seq", p + "seq"} {
		if ack, err := exists(rdb.Get(ctx, k)); err != nil || ack {
			return err
		}
	}
	return fmt.Errorf("%w: %s is a sorted or windowed queue; walq-redis runs only stats, dlq and requeue-expired on it",
		queue.ErrInvalidOptions, cli.Redacted(target))
}

// exists reports whether the read c found its key (or field).
func exists(c *redis.StringCmd) (bool, error) {
	err := c.Err()
	if errors.Is(err, redis.Nil) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read %v: %w", c.Args()[1], err)
	}
	return true, nil
}

// ownedQueue is a queue handle whose client the command opened: Close
// closes both.
type ownedQueue struct {
	*redisq.Queue
	rdb *redis.Client
}

func (q ownedQueue) Close() error { return errors.Join(q.Queue.Close(), q.rdb.Close()) }

// OpenSorted opens the sorted or windowed queue target names with the
// sort key kind and form it records (sortedKind); nil when it holds none,
// or an ack queue too.
func (engine) OpenSorted(ctx context.Context, target string, o cli.EngineOptions) (any, error) {
	rdb, name, err := client(target)
	if err != nil {
		return nil, err
	}
	if err := refuseRetries(rdb, target, o.Inspect); err != nil {
		return nil, errors.Join(err, rdb.Close())
	}
	x, err := openSorted(ctx, rdb, name, o)
	if err != nil || x == nil {
		return nil, errors.Join(refusedWrites(err, o.Inspect), rdb.Close())
	}
	return x, nil
}

// openSorted opens the sorted or windowed queue name on rdb, nil when
// there is none (see OpenSorted). The window of a windowed queue is the
// application's: listing and changing dead values does not use it.
func openSorted(ctx context.Context, rdb *redis.Client, name string, o cli.EngineOptions) (any, error) {
	kind, form, single, err := sortedKind(ctx, rdb, name)
	if err != nil || kind == "" {
		return nil, err
	}
	so := redisq.SortedOptions{Options: *ownerOptions(o), SingleFlight: single}
	if form == "windowed" {
		w, err := redisq.OpenWindowed(ctx, rdb, name, &redisq.WindowOptions{SortedOptions: so, Window: time.Second})
		if err != nil {
			return nil, err
		}
		return ownedSorted[time.Time]{Sorted: w.Sorted, rdb: rdb,
			id: queue.Identity{Kind: queue.KindWindowed, SortKey: "time"}}, nil
	}
	switch kind {
	case "int":
		return ownSorted[int64](ctx, rdb, name, &so, "int64")
	case "uint":
		return ownSorted[uint64](ctx, rdb, name, &so, "uint64")
	case "float":
		return ownSorted[float64](ctx, rdb, name, &so, "float64")
	case "time":
		return ownSorted[time.Time](ctx, rdb, name, &so, "time")
	case "string":
		return ownSorted[string](ctx, rdb, name, &so, "string")
	}
	return nil, fmt.Errorf("%w: sorted queue %q records sort keys of kind %q, which this walq-redis does not know",
		queue.ErrInvalidOptions, name, kind)
}

// sortedKind returns the sort key kind, the form and the SingleFlight the
// sorted queue name records, which the handle takes on so that its
// requeue of a dead value keeps a single-flight queue's key with a batch
// out from being pulled again; no kind when the name holds no sorted queue or an ack queue
// too. A sorted queue made by a version that recorded no kind is refused:
// its sort keys cannot be read without it. It reads with GET and HMGET,
// which redisq.Open and OpenSorted run too.
func sortedKind(ctx context.Context, rdb redis.Cmdable, name string) (kind, form string, single bool, err error) {
	p := "walq:{" + name + "}:"
	for _, k := range []string{p + "2:seq", p + "seq"} {
		if ack, err := exists(rdb.Get(ctx, k)); err != nil || ack {
			return "", "", false, err
		}
	}
	vals, err := rdb.HMGet(ctx, p+"s:stats", "kind", "form", "single").Result()
	if err != nil {
		return "", "", false, fmt.Errorf("read %ss:stats: %w", p, err)
	}
	kind, _ = vals[0].(string)
	form, _ = vals[1].(string)
	rec, _ := vals[2].(string)
	if kind != "" {
		return kind, form, rec == "1", nil
	}
	if sorted, err := exists(rdb.Get(ctx, p+"s:seq")); err != nil || !sorted {
		return "", "", false, err
	}
	return "", "", false, fmt.Errorf("%w: sorted queue %q records no sort key kind (an earlier version of redisq made it), which walq-redis needs to read its sort keys",
		queue.ErrInvalidOptions, name)
}

// ownSorted opens the sorted queue name with sort keys of type K, named
// keyType as a directory's identity names it.
func ownSorted[K queue.SortKey](ctx context.Context, rdb *redis.Client, name string, so *redisq.SortedOptions,
	keyType string) (any, error) {
	s, err := redisq.OpenSorted[K](ctx, rdb, name, so)
	if err != nil {
		return nil, err
	}
	return ownedSorted[K]{Sorted: s, rdb: rdb, id: queue.Identity{Kind: queue.KindSorted, SortKey: keyType}}, nil
}

// ownedSorted is a sorted queue handle whose client the command opened:
// Close closes both.
type ownedSorted[K queue.SortKey] struct {
	*redisq.Sorted[K]
	rdb *redis.Client
	id  queue.Identity // sorted or windowed, and the sort key type; no format
}

func (s ownedSorted[K]) Close() error { return errors.Join(s.Sorted.Close(), s.rdb.Close()) }

// Identity says what the queue is, for stats.
func (s ownedSorted[K]) Identity() queue.Identity { return s.id }
