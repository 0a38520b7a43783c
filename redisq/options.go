package redisq

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/walq/walq/queue"
)

// Options configures a queue handle. A nil *Options means the defaults;
// zero fields take their defaults. The semantic fields carry the names
// and defaults of queue.Options.
type Options struct {
	// AckTimeout is how long a delivery owns its message, counted from the
	// delivery. Default 30s. Any positive lease is taken, as on the
	// embedded queue: its deadline is counted in whole microseconds,
	// rounded up.
	AckTimeout time.Duration
	// MaxDeliveries is how many deliveries a message gets before a nack or
	// an expired lease moves it to the dead-letter set. Default 10;
	// negative means no limit.
	MaxDeliveries int
	// DedupWindow is how long the id of an acked (or purged) message with
	// a producer-given id keeps refusing this handle's enqueues of it,
	// counted from the ack by a handle with a window; an ack by this
	// handle is kept for the others if it is positive. Default 0: only
	// live ids refuse (see the package doc's differences). It is counted
	// in whole microseconds, rounded up.
	DedupWindow time.Duration
	// MaxMessageSize is the largest payload accepted. Default 4 MiB; at
	// most queue.MaxMessageSizeLimit (1 GiB), as on the embedded queue.
	MaxMessageSize int
	// Sync is the durability the server must give; Open checks the
	// server's configuration against it. Default SyncAlways.
	Sync queue.SyncMode
	// TrustServer skips Open's check of the server's configuration, for
	// servers that refuse CONFIG GET; durability is then the server's.
	TrustServer bool
	// Replicas, when positive, makes every change wait until that many
	// replicas have received it (WAIT); fewer within WaitTimeout fails
	// the call with ErrNotDurable (the change was made), but for what
	// the call did not do, which fails as without Replicas (a stale
	// receipt with queue.ErrLeaseLost, a taken id with
	// queue.ErrDuplicate), and for a dequeue or pull, which reports no
	// ErrNotDurable: it returns what it leased, or finds nothing
	// (queue.ErrEmpty; a blocking one waits). Reads (Stats,
	// DeadLetters) do not wait.
	Replicas int
	// WaitTimeout bounds the wait for Replicas. Default 1s. It must be
	// below the client's ReadTimeout (go-redis's default is 5s), or Open
	// fails with queue.ErrInvalidOptions: go-redis fails the whole
	// pipeline when the WAIT outlasts the ReadTimeout, and the reply of
	// the call that ran before it is lost.
	WaitTimeout time.Duration
	// OpTimeout bounds the calls that take no context (Ack, TryDequeue,
	// Stats, ...), and each call to the server of a Dequeue or Pull,
	// which its context does not end (what the server leased is the
	// caller's). Default 5s. With Replicas, a call may take OpTimeout
	// and WaitTimeout. It ends the wait for a reply only with a client
	// that ends a command's wait with its context (go-redis's
	// ContextTimeoutEnabled); with go-redis's default the client's
	// ReadTimeout bounds it instead, so while the server holds writes
	// (CLIENT PAUSE WRITE, a failover) a call waits up to that long
	// whatever OpTimeout. It also bounds how long a call the server
	// refused without running it (a cluster's MOVED, ASK, TRYAGAIN,
	// CLUSTERDOWN during a failover or a migration of the queue's slot;
	// READONLY; LOADING), or that was never sent (no connection could be
	// made for it, as to a primary that died, or none of the client's
	// pool came free within PoolTimeout), is sent again, when its context
	// does not end it sooner: after that the call returns the last
	// refusal or failure (see the package doc for calls sent together
	// with others). Each send after the first waits for a connection
	// (a dial, the pool) under a context that ends there, so a call whose
	// context has no deadline returns within one send and OpTimeout (with
	// Replicas, and WaitTimeout); one send takes what the client allows
	// it: with go-redis's defaults a dial to an address that drops
	// packets is tried DialerRetries (5) times for DialTimeout (5s), with
	// 100ms between, 25.4s, so such a call returns after 30.4s with the
	// default OpTimeout (measured: about 30.5s, TestBlackholeDefaults,
	// bench/results/redisq-blackhole-2026-12-06.txt). A send the bound ended returns the context's
	// error with the first send's failure. On a client that ends a
	// command's wait with its context (ContextTimeoutEnabled) the bound
	// ends the wait for the reply of a send after the first as well: one
	// that got a connection just before it may have run though the call
	// returns a timeout. Open's commands that are safe
	// to send again (CONFIG GET, the GET of an older layout's key, FUNCTION
	// LIST and LOAD, the functions of its checks that write nothing, a
	// sorted queue's HGET and HSETNX of its records, SUBSCRIBE) ride a
	// failover so too, each for at most OpTimeout from its first failure,
	// looking up the queue's master again for each send; READONLY is not
	// ridden there (Open reports a read-only replica). An Open that never
	// got through fails with the last failure, saying it was sent again
	// within OpTimeout.
	OpTimeout time.Duration
	// ManualRequeue turns off the automatic return of expired leases by
	// this handle; call RequeueExpired instead. Other handles may still
	// return them.
	ManualRequeue bool
	// AcceptDoubleRuns lets a handle that may write open on a client that
	// sends a command again on a new connection after its connection
	// dropped (go-redis's MaxRetries above 0; its default, 0, means 3; a
	// ClusterClient's MaxRedirects above 0, likewise), or on a client
	// whose retries Open cannot read (not a *redis.Client,
	// *redis.ClusterClient or *redis.Ring), or on a ClusterClient or
	// Ring whose NewClient hook built node clients with MaxRetries above
	// 0 (Open reads the node clients it holds then). Open refuses such a
	// client otherwise (queue.ErrInvalidOptions). What it costs: a call whose
	// reply is lost after the server ran it runs again, and its caller
	// gets the second run's outcome with no error: an Enqueue of a
	// generated id enqueues its message twice, an Ack or a settle that
	// happened fails with queue.ErrLeaseLost, an Enqueue WithID that
	// happened fails with queue.ErrDuplicate, and a Dequeue's first lease
	// is held by no one until it runs out. See the package doc. A call
	// the server refused without running it (MOVED, ASK, TRYAGAIN,
	// CLUSTERDOWN, READONLY, LOADING), or that was never sent (a dial
	// error, the pool's timeout), needs no retrying client: the handle
	// sends it again itself (OpTimeout). On a client that retries, the
	// handle does not send again a call whose last send failed to dial or
	// timed out in the pool: the client's send before it may have run.
	// It does send again a refused call, on such a client too, and there
	// the refusal proves only that the client's last send did not run: a
	// send of it before, whose connection dropped after the server ran
	// it, was retried by the client and refused (a failover or a slot
	// that moved between the two). Any call that may write can then run
	// twice, with the costs above: an Enqueue of a generated id enqueues
	// twice, an Ack, Nack or settle that happened fails with
	// queue.ErrLeaseLost, an Enqueue WithID with queue.ErrDuplicate, and
	// a Dequeue's or Pull's first lease is held by no one until it runs
	// out (the message counts one more delivery). Reads, and Open's
	// commands, run twice harmlessly: Open sends its commands again after
	// a dial error or the pool's timeout on such a client too.
	AcceptDoubleRuns bool
	// ReadOnly opens a handle that only reads (Stats, DeadLetters) and
	// changes nothing on the queue: it starts no housekeeper, so it ends
	// no lease and makes no delayed message ready, and its calls that
	// would change the queue (RequeueExpired among them) fail with
	// queue.ErrReadOnly. Open skips the checks that only a writer
	// needs: it reads no server configuration (Sync), opens on a read-only
	// replica, and asks the ACL for the read commands only; the handle
	// calls the functions with FCALL_RO, so a user granted the queue's
	// keys for reading alone opens it (see the package doc). It still
	// loads the function library into a server that lacks it, and fails
	// (queue.ErrInvalidOptions) on a replica that lacks it, which cannot
	// load it. It applies to Open only: OpenSorted and OpenWindowed
	// refuse it.
	ReadOnly bool
	// Clock is the source of time for every script this handle runs.
	// Default the system clock.
	Clock queue.Clock
	// Logger receives the handle's background events at Info and above:
	// leases that ran out (one line per pass that ended any), a sorted
	// queue's batches whose lease ended with their record unreadable
	// (Warn, naming them; see Sorted.RequeueExpired), a housekeeping
	// failure and its recovery (the pass is retried every second; a pass
	// whose connection dropped is passed again at once first, so a stale
	// pooled connection logs nothing), and,
	// apart from those, passes that did their work but fell short of
	// Replicas (ErrNotDurable) and the pass that reached them again, each
	// once; a message leased for a Dequeue whose context ended
	// meanwhile that could not be given back (Warn).
	// Nothing else is logged per message. Default nil: no logging.
	Logger *slog.Logger

	// restless, set only by tests, makes the housekeeper start its next
	// pass as soon as the last ends instead of waiting for a deadline or
	// a kick: a pass may then run at any moment of a test, as a pass
	// woken earlier may on a loaded machine.
	restless bool
}

type systemClock struct{}

func (systemClock) Now() time.Time                         { return time.Now() }
func (systemClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// withDefaults returns a copy of o with defaults filled in, or an error
// wrapping queue.ErrInvalidOptions.
func (o *Options) withDefaults() (Options, error) {
	var c Options
	if o != nil {
		c = *o
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.AckTimeout, 30*time.Second)
	def(&c.WaitTimeout, time.Second)
	def(&c.OpTimeout, 5*time.Second)
	if c.MaxDeliveries == 0 {
		c.MaxDeliveries = 10
	}
	if c.MaxMessageSize == 0 {
		c.MaxMessageSize = 4 << 20
	}
	if c.Clock == nil {
		c.Clock = systemClock{}
	}
	switch {
	case c.AckTimeout < 0:
		return c, fmt.Errorf("%w: redisq: AckTimeout %v is negative", queue.ErrInvalidOptions, c.AckTimeout)
	case c.MaxMessageSize < 0 || c.MaxMessageSize > queue.MaxMessageSizeLimit:
		return c, fmt.Errorf("%w: redisq: MaxMessageSize %d out of range", queue.ErrInvalidOptions, c.MaxMessageSize)
	case c.DedupWindow < 0, c.Replicas < 0, c.WaitTimeout < 0, c.OpTimeout < 0:
		return c, fmt.Errorf("%w: redisq: a duration or count is negative", queue.ErrInvalidOptions)
	case c.Sync != queue.SyncAlways && c.Sync != queue.SyncInterval && c.Sync != queue.SyncNever:
		return c, fmt.Errorf("%w: redisq: unknown sync mode %v", queue.ErrInvalidOptions, c.Sync)
	}
	return c, nil
}

// checkReadTimeout refuses a WaitTimeout that the client's ReadTimeout
// would cut short (an error wrapping queue.ErrInvalidOptions): go-redis
// then fails the pipeline of the call and its WAIT, and the call's reply
// is lost although the call ran. A ReadOnly handle waits for nothing.
func (o *Options) checkReadTimeout(rdb redis.UniversalClient) error {
	if o.Replicas == 0 || o.ReadOnly {
		return nil
	}
	rt, ok := readTimeout(rdb)
	if !ok || o.WaitTimeout < rt {
		return nil
	}
	return fmt.Errorf("%w: redisq: WaitTimeout %v is not below the client's ReadTimeout %v, which would fail a WAIT that runs to its end and lose the reply of the call it follows; lower WaitTimeout or raise the client's ReadTimeout (-1: none)",
		queue.ErrInvalidOptions, o.WaitTimeout, rt)
}

// readTimeout returns how long the client waits for a reply, or false
// where it does not bound it or does not say. Client and ClusterClient
// hold their options normalized (positive: the timeout; 0 or negative:
// none); a Ring holds them as given (0: go-redis's default of 5s;
// negative: none).
func readTimeout(rdb redis.UniversalClient) (time.Duration, bool) {
	switch c := rdb.(type) {
	case *redis.Client:
		return c.Options().ReadTimeout, c.Options().ReadTimeout > 0
	case *redis.ClusterClient:
		return c.Options().ReadTimeout, c.Options().ReadTimeout > 0
	case *redis.Ring:
		if rt := c.Options().ReadTimeout; rt != 0 {
			return rt, rt > 0
		}
		return 5 * time.Second, true
	}
	return 0, false
}

// checkRetries refuses, for a handle that may write, a client that sends
// a command again on a new connection when the last dropped (an error
// wrapping queue.ErrInvalidOptions, unless AcceptDoubleRuns): a script
// call that ran before the drop then runs again, and its caller gets the
// second run's outcome. Client, ClusterClient and Ring hold MaxRetries
// normalized (0: none); a ClusterClient also sends a command again, on
// another connection or node, up to MaxRedirects times (normalized too),
// whatever its MaxRetries (osscluster.go process, shouldRetry). A
// failover cluster client (NewFailoverClusterClient) takes MaxRedirects
// from its FailoverOptions' MaxRetries. The retries of another client
// cannot be read, and it is refused as one that retries. A ReadOnly handle's calls change
// nothing, so their second run reports what the first would have.
func (o *Options) checkRetries(rdb redis.UniversalClient) error {
	if o.AcceptDoubleRuns || o.ReadOnly {
		return nil
	}
	if cc, ok := rdb.(*redis.ClusterClient); ok && cc.Options().MaxRedirects > 0 {
		return fmt.Errorf("%w: redisq: the cluster client sends a command again after its connection dropped, up to "+
			"MaxRedirects (%d) times, so a call that ran before the drop runs twice and its caller gets the second "+
			"run's outcome; give the handle a cluster client with MaxRetries: -1 and MaxRedirects: -1 (go-redis's "+
			"default 0 means 3), or set Options.AcceptDoubleRuns to accept it", queue.ErrInvalidOptions, cc.Options().MaxRedirects)
	}
	n, known := maxRetries(rdb)
	switch {
	case !known:
		return fmt.Errorf("%w: redisq: cannot read how often a client of type %T sends a command again after its connection dropped; "+
			"give the handle a *redis.Client, *redis.ClusterClient or *redis.Ring with MaxRetries: -1 (a cluster "+
			"client: and MaxRedirects: -1), or set "+
			"Options.AcceptDoubleRuns to accept that a call may run twice", queue.ErrInvalidOptions, rdb)
	case n > 0:
		return fmt.Errorf("%w: redisq: the client sends a command again after its connection dropped (%d retries), so a call "+
			"that ran before the drop runs twice and its caller gets the second run's outcome; give the handle a "+
			"client with MaxRetries: -1 (go-redis's default 0 means 3), or set Options.AcceptDoubleRuns to accept it",
			queue.ErrInvalidOptions, n)
	}
	return nil
}

// clientResends reports whether a handle of these options on rdb sends
// its calls through a client that may send a command again itself after
// its connection dropped: one Open let through only because
// AcceptDoubleRuns is set (the retries checkRetries and
// checkNodeRetries refuse, or retries they cannot read). Such a client's
// error is that of its last send only: a dial's error then may follow
// an earlier send that was written and ran.
func (o *Options) clientResends(ctx context.Context, rdb redis.UniversalClient) bool {
	if !o.AcceptDoubleRuns || o.ReadOnly {
		return false
	}
	strict := *o
	strict.AcceptDoubleRuns = false
	return strict.checkRetries(rdb) != nil || strict.checkNodeRetries(ctx, rdb) != nil
}

// maxRetries returns how many times the client sends a command again
// after its connection dropped, or false where it cannot be read.
func maxRetries(rdb redis.UniversalClient) (int, bool) {
	switch c := rdb.(type) {
	case *redis.Client:
		return c.Options().MaxRetries, true
	case *redis.ClusterClient:
		return c.Options().MaxRetries, true
	case *redis.Ring:
		return c.Options().MaxRetries, true
	}
	return 0, false
}

// checkNodeRetries refuses, as checkRetries does, a cluster client or
// Ring whose NewClient hook builds node clients that send a command
// again after their connection dropped (MaxRetries above 0): the node
// client runs the call again whatever its cluster or ring client's
// options say. It reads the node clients the client holds at Open: a
// cluster's masters and replicas, once it has looked them up, a Ring's
// shards that are up; a node that joins later is not read.
func (o *Options) checkNodeRetries(ctx context.Context, rdb redis.UniversalClient) error {
	if o.AcceptDoubleRuns || o.ReadOnly {
		return nil
	}
	var each func(context.Context, func(context.Context, *redis.Client) error) error
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		if c.Options().NewClient != nil {
			each = c.ForEachShard
		}
	case *redis.Ring:
		if c.Options().NewClient != nil {
			each = c.ForEachShard
		}
	}
	if each == nil {
		return nil
	}
	return each(ctx, func(_ context.Context, n *redis.Client) error {
		if r := n.Options().MaxRetries; r > 0 {
			return fmt.Errorf("%w: redisq: the client's NewClient hook built a node client for %s that sends a command "+
				"again after its connection dropped (%d retries), so a call that ran before the drop runs twice and "+
				"its caller gets the second run's outcome; build node clients with MaxRetries: -1, or set "+
				"Options.AcceptDoubleRuns to accept it", queue.ErrInvalidOptions, n.Options().Addr, r)
		}
		return nil
	})
}
