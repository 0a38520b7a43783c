package redisq

import (
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
	// and WaitTimeout.
	OpTimeout time.Duration
	// ManualRequeue turns off the automatic return of expired leases by
	// this handle; call RequeueExpired instead. Other handles may still
	// return them.
	ManualRequeue bool
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
	// failure and its recovery (the pass is retried every second), and,
	// apart from those, passes that did their work but fell short of
	// Replicas (ErrNotDurable) and the pass that reached them again, each
	// once; and, at Open of a handle that may write, a client that sends
	// a command again after its connection dropped (go-redis's
	// MaxRetries, 3 by default; see the package doc), at Warn.
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

// warnRetries logs, at Warn, a client that sends a command again on a new
// connection when the last dropped: a script call that ran before the
// drop then runs twice, and its caller gets the second run's outcome.
// Client and ClusterClient hold MaxRetries normalized (0: none); a Ring
// or another client is not checked. A ReadOnly handle's calls change
// nothing, so their second run reports what the first would have.
func (o *Options) warnRetries(rdb redis.UniversalClient) {
	if o.Logger == nil || o.ReadOnly {
		return
	}
	n := 0
	switch c := rdb.(type) {
	case *redis.Client:
		n = c.Options().MaxRetries
	case *redis.ClusterClient:
		n = c.Options().MaxRetries
	}
	if n > 0 {
		o.Logger.Warn("redisq: the client retries commands (MaxRetries); a call whose connection drops after it ran may run twice: give the handle a client with MaxRetries -1", "retries", n)
	}
}
