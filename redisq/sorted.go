package redisq

import (
	"cmp"
	"context"
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/vmihailenco/msgpack/v5"
	"github.com/walq/walq/internal/sortkey"
	"github.com/walq/walq/queue"
)

// SortedOptions configures a sorted queue handle. A nil *SortedOptions
// means the defaults.
type SortedOptions struct {
	// Options are the handle's options: AckTimeout is the lease of a
	// pulled batch; DedupWindow does not apply.
	Options
	// SingleFlight keeps a key that has a leased batch from being pulled
	// again until that batch is acked or returned. Every handle of a
	// queue must agree on it: the queue records it, OpenSorted refuses
	// a writing handle that disagrees (queue.ErrInvalidOptions), and a
	// handle without it opened before it was recorded follows the
	// recorded setting.
	SingleFlight bool
}

// Sorted is a handle on a sorted queue kept in Redis: values ordered by a
// sort key of type K and pulled as whole keys, as queue.Sorted. Every
// handle of a queue must use the same K.
type Sorted[K queue.SortKey] struct {
	*handle
	single bool          // SortedOptions.SingleFlight
	fixed  bool          // K's sort parts have 8 bytes
	window time.Duration // windowed form: a key is due Window after its oldest value
}

var _ queue.SortedQueue[int64] = (*Sorted[int64])(nil)

// sortedValue is a value as stored in the val hash; only clients read it.
type sortedValue struct {
	_msgpack struct{} `msgpack:",as_array"` //nolint:unused // msgpack's layout tag

	Sort    []byte // its sort part
	At      int64  // publish time, Unix nanoseconds
	Payload []byte
}

// OpenSorted returns a handle on the sorted queue called name. It checks
// the server as Open does.
func OpenSorted[K queue.SortKey](ctx context.Context, rdb redis.UniversalClient, name string, opts *SortedOptions) (*Sorted[K], error) {
	var so SortedOptions
	if opts != nil {
		so = *opts
	}
	return openSorted[K](ctx, rdb, name, so, 0)
}

func openSorted[K queue.SortKey](ctx context.Context, rdb redis.UniversalClient, name string, so SortedOptions, window time.Duration) (*Sorted[K], error) {
	o, err := so.Options.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := o.checkReadTimeout(rdb); err != nil {
		return nil, err
	}
	if err := o.checkRetries(rdb); err != nil {
		return nil, err
	}
	if err := o.checkNodeRetries(ctx, rdb); err != nil {
		return nil, err
	}
	if name == "" || strings.ContainsAny(name, "{}") {
		return nil, fmt.Errorf("%w: redisq: queue name %q is empty or holds a brace", queue.ErrInvalidOptions, name)
	}
	p := "walq:{" + name + "}:s:"
	var ks []string
	for _, k := range []string{"seq", "val", "vinfo", "vreason", "pend", "order", "pos", "batch", "bdue", "flight", "hold", "dead", "stats", "age"} {
		ks = append(ks, p+k)
	}
	s := &Sorted[K]{handle: newHandle(rdb, ks, p+"wake", o), single: so.SingleFlight, fixed: isFixed[K](), window: window}
	s.resends = o.clientResends(ctx, rdb)
	s.types = sortedTypes
	if !o.TrustServer && !o.ReadOnly {
		if err := s.checkServer(ctx, o.Sync); err != nil {
			return nil, err
		}
	}
	if err := s.loadAll(ctx, sortedLibrary); err != nil {
		if refusedFor(err, "READONLY") { // a replica whose master has not loaded this version
			return nil, onReplica(err, o.ReadOnly)
		}
		return nil, err
	}
	argv := []any{s.wake, unixMicros(o.Clock.Now()), 0, 0, 0, 0, "probe"}
	if !o.ReadOnly {
		if err := s.checkWritable(ctx, fnSortedWritable, argv); err != nil {
			return nil, err
		}
	}
	if err := s.checkACL(ctx, fnSortedProbe, argv, o.ReadOnly); err != nil {
		return nil, err
	}
	// A hash deleted since the queue's first publish (scripts/sorted.lua,
	// held) refuses the handle before checkKind may write.
	if _, err := s.run(ctx, o.Clock.Now(), "held"); err != nil {
		return nil, err
	}
	if err := checkKind(ctx, s.handle, name, ks[0], ks[12], sortKind[K](), formOf(window), o.ReadOnly); err != nil {
		return nil, err
	}
	if !o.ReadOnly {
		if err := checkSingle(ctx, s.handle, name, ks[12], so.SingleFlight); err != nil {
			return nil, err
		}
	}
	if err := s.start(ctx, s.sweep); err != nil {
		return nil, err
	}
	return s, nil
}

// formOf names the form of a handle whose window is window (0: sorted),
// as the queue records it (checkForm).
func formOf(window time.Duration) string {
	if window > 0 {
		return "windowed"
	}
	return "sorted"
}

// run runs the sorted script's operation op at time now.
func (s *Sorted[K]) run(ctx context.Context, now time.Time, op string, args ...any) (any, error) {
	single, fixed := "0", "0"
	if s.single {
		single = "1"
	}
	if s.fixed {
		fixed = "1"
	}
	argv := append([]any{s.wake, unixMicros(now), s.o.MaxDeliveries, single, span(now, s.o.AckTimeout), fixed, op}, args...)
	f := fnSortedSettle
	switch op {
	case "publish", "pull":
		f = fnSortedGrow
	case "stats", "deadlist", "held":
		f = fnSortedRead
	}
	v, err := s.call(ctx, f, argv)
	return v, scriptErr(op, err)
}

// Publish adds a value under key at sort position sort. A NaN, or a
// time.Time outside the years 1678 to 2262 (such as the zero time), is
// refused with queue.ErrInvalidOptions, and so is a key of 65,535 bytes
// or more, which the embedded queue takes (the server's members carry a
// key's length in two bytes).
//
// Publish runs under ctx and waits for its reply as long as the client
// does (go-redis: its ReadTimeout, or the context's deadline with
// ContextTimeoutEnabled). When ctx ended and the client stopped waiting
// after the call was sent, it returns ErrMayHaveRun, wrapping the
// context's error: the value may be published, or not. A sorted queue
// keeps no id per value, so nothing tells which: a Publish sent again
// after ErrMayHaveRun publishes the value a second time if the first
// ran, and a batch of its key then holds it twice. Publish again only a
// value whose consumer takes a repeat harmlessly; else count it as
// maybe lost. A Publish whose ctx ended and that returns the context's
// error without ErrMayHaveRun did not run: the server refused it, or it
// was never sent (its connection could not be made, or failed while the
// client set it up). A connection that failed after the call was sent
// (EOF, a reset) leaves its outcome unknown, as for any call (see the
// package documentation).
func (s *Sorted[K]) Publish(ctx context.Context, sort K, key string, payload []byte) error {
	part, err := sortPart(sort)
	if err != nil {
		return err
	}
	return s.publish(ctx, s.o.Clock.Now(), part, key, payload)
}

func (s *Sorted[K]) publish(ctx context.Context, now time.Time, part []byte, key string, payload []byte) error {
	if len(payload) > s.o.MaxMessageSize {
		return fmt.Errorf("%w: %d bytes, limit %d", queue.ErrTooLarge, len(payload), s.o.MaxMessageSize)
	}
	if len(key) >= math.MaxUint16 {
		return fmt.Errorf("%w: key of %d bytes", queue.ErrInvalidOptions, len(key))
	}
	b, err := msgpack.Marshal(&sortedValue{Sort: part, At: now.UnixNano(), Payload: payload})
	if err != nil {
		return fmt.Errorf("redisq: encode value: %w", err)
	}
	_, err = s.run(ctx, now, "publish", key, part, b)
	return s.sentAlone(ctx, err)
}

// Pull returns the batches of up to about max values, keys in order of
// their smallest pending sort key, whole keys only (see queue.Sorted.Pull).
// It blocks until a key can be pulled, ctx ends or the handle is closed.
// A max above the 1000 batches one call to the server leases takes more
// calls; when a later one fails (ctx ends between them, the connection
// drops), Pull returns the batches leased before with a nil error, and
// the next Pull reports the failure if it lasts.
func (s *Sorted[K]) Pull(ctx context.Context, max int) ([]*queue.Batch[K], error) {
	return s.pull(ctx, max, true)
}

// TryPull is Pull without waiting: ErrEmpty when no key can be pulled.
func (s *Sorted[K]) TryPull(max int) ([]*queue.Batch[K], error) {
	ctx, cancel := s.opContext()
	defer cancel()
	return s.pull(ctx, max, false)
}

func (s *Sorted[K]) pull(ctx context.Context, max int, block bool) ([]*queue.Batch[K], error) {
	if max <= 0 {
		return nil, fmt.Errorf("%w: pull of %d values", queue.ErrInvalidOptions, max)
	}
	chain := false // woken by a wake-up: it wakes the next waiter on its way out
	for {
		if err := ctx.Err(); err != nil {
			if chain { // the call's one announcement must not end here
				s.ready.notifyOne()
			}
			return nil, err
		}
		woken := s.ready.register()
		bs, due, buried, again, err := s.pullOnce(ctx, max)
		if err == nil && len(bs) == 0 && (buried > 0 || again) { // more may be pullable
			s.pass(woken)
			continue
		}
		if err != nil || len(bs) > 0 || !block {
			// A call that makes keys pullable announces them once, however
			// many: a woken pull that leased, or failed, wakes the next
			// waiter, as a dequeue does, and one that found nothing ends
			// the chain.
			s.pass(woken)
			if chain && (len(bs) > 0 || err != nil) {
				s.ready.notifyOne()
			}
			if err == nil && len(bs) == 0 {
				err = queue.ErrEmpty
			}
			return bs, err
		}
		var timer <-chan time.Time
		if !due.IsZero() {
			timer = s.o.Clock.After(due.Sub(s.o.Clock.Now()))
		}
		select {
		case <-ctx.Done():
			s.pass(woken)
			return nil, ctx.Err()
		case <-s.closed:
			return nil, queue.ErrClosed
		case <-woken:
			chain = true
		case <-timer:
			s.pass(woken)
		}
	}
}

// pass deregisters a waiter that is leaving and hands a wake-up it
// received on to another waiter.
func (h *handle) pass(woken chan struct{}) {
	if h.ready.deregister(woken) {
		h.ready.notifyOne()
	}
}

// pullTokens is the most batches one call of the pull function leases:
// each takes a lease token the client draws and sends, so a pull of a
// larger max (math.MaxInt: everything) calls again while every token was
// taken, instead of drawing a token per value max allows.
const pullTokens = 1000

// pullOnce runs one pull. With nothing pullable it returns when a key may
// become pullable by time alone (a hold ends, a window closes), or zero.
// A batch that does not decode goes to the dead set (its values are
// settled together) with a reason saying so; buried counts those. again
// tells that the last call stopped at its bound on order members that
// named no values (scripts/sorted_ops.lua): a key may be pullable behind
// them. A call that stops so having leased nothing wakes no other
// handle, so it is always called again: here when an earlier call leased
// batches, else by pull.
func (s *Sorted[K]) pullOnce(ctx context.Context, max int) (bs []*queue.Batch[K], due time.Time, buried int, again bool, err error) {
	now := s.o.Clock.Now()
	var raw, r []any
	var late error // a call after the first failed: reported only when no batch is returned
	for n := 0; n < max; {
		if err := ctx.Err(); err != nil && r != nil { // the call leases past ctx: see leaseContext
			late = err
			break
		}
		tokens := min(max-n, pullTokens)
		next, err := s.pullCall(ctx, now, max-n, tokens)
		if err != nil && r == nil {
			return nil, time.Time{}, 0, false, err
		}
		if err != nil {
			late = err
			break
		}
		r = next
		got, _ := r[0].([]any)
		raw = append(raw, got...)
		again = toInt(r[3]) == 1
		if again && len(got) == 0 && len(raw) > 0 {
			continue // a call that leased nothing woke no one: go on past the idle members
		}
		if len(got) < tokens || again {
			break
		}
		n += countValues(got)
	}
	out := make([]*queue.Batch[K], 0, len(raw))
	var failed error // a failed bury: the batch stays leased until its lease runs out
	for _, x := range raw {
		b, err := s.decodeBatch(x, now)
		if err != nil {
			if err := s.bury(x, err); err != nil {
				failed = err
				continue
			}
			buried++
			continue
		}
		out = append(out, b)
	}
	switch {
	case len(out) > 0: // the caller's, with no error: the next pull meets a failure that lasts
		return out, s.pullableAt(r), buried, again, nil
	case failed != nil:
		return nil, time.Time{}, buried, again, errors.Join(failed, late)
	}
	return out, s.pullableAt(r), buried, again, late
}

// pullCall runs the pull function once, for up to max values and tokens
// batches, and returns its reply: {batches, earliest hold end or -1, sort
// part of the first key or ”, again}. When only the WAIT after the call
// failed (ErrNotDurable) it returns the reply with no error: the batches
// are leased and must reach the caller, and with none the pull found
// none (ErrEmpty, or a blocking Pull waits). A lease the replicas lack is
// at worst lost in a failover, and the batch pulled again.
func (s *Sorted[K]) pullCall(ctx context.Context, now time.Time, max, tokens int) ([]any, error) {
	bound := ""
	if s.window > 0 {
		bound = string(windowBound(now, s.window))
	}
	args := []any{max, bound}
	for range tokens {
		args = append(args, strconv.FormatUint(newToken(), 10))
	}
	cctx, cancel := s.leaseContext(ctx)
	defer cancel()
	v, err := s.run(cctx, now, "pull", args...)
	if !replied(v, err) {
		return nil, err
	}
	r, _ := v.([]any)
	if len(r) != 4 {
		return nil, fmt.Errorf("redisq: pull: unexpected reply %v", v)
	}
	return r, nil
}

// countValues returns how many values the pulled batches raw hold.
func countValues(raw []any) int {
	n := 0
	for _, x := range raw {
		if b, _ := x.([]any); len(b) == 3 {
			vals, _ := b[2].([]any)
			n += len(vals)
		}
	}
	return n
}

// pullableAt returns when a key may become pullable by time alone, from a
// pull's reply r: a hold ends, or, windowed, the first key's window
// closes; zero when neither.
func (s *Sorted[K]) pullableAt(r []any) time.Time {
	var due time.Time
	if h := toInt(r[1]); h >= 0 {
		due = time.UnixMicro(h)
	}
	if head, _ := r[2].(string); s.window > 0 && len(head) == 8 {
		at := time.Unix(0, int64(binary.BigEndian.Uint64([]byte(head))^(1<<63))).Add(s.window)
		if due.IsZero() || at.Before(due) {
			due = at
		}
	}
	return due
}

// windowBound is the sort part of the latest publish time whose key is
// due at now: now less the window, saturated at the times a sort key
// holds (the years 1678 to 2262) as the embedded queue saturates, so that
// a clock past them takes every key as due instead of wrapping.
func windowBound(now time.Time, window time.Duration) []byte {
	t := now.Add(-window)
	switch {
	case t.After(sortkey.MaxTime):
		return sortkey.OrderedInt(math.MaxInt64)
	case t.Before(sortkey.MinTime):
		return sortkey.OrderedInt(math.MinInt64)
	}
	return sortkey.OrderedInt(t.UnixNano())
}

// bury dead-letters the pulled batch x, which failed to decode with why.
func (s *Sorted[K]) bury(x any, why error) error {
	b, _ := x.([]any)
	if len(b) != 3 {
		return why
	}
	lease, err := strconv.ParseUint(fmt.Sprint(b[0]), 10, 64)
	if err != nil {
		return why
	}
	if err := s.settle("dead", lease, corruptReason+why.Error()); err != nil && !errors.Is(err, ErrNotDurable) {
		return fmt.Errorf("redisq: pull: dead-letter a batch that does not decode (%v): %w", why, err)
	}
	return nil
}

func (s *Sorted[K]) decodeBatch(x any, now time.Time) (*queue.Batch[K], error) {
	b, _ := x.([]any)
	if len(b) != 3 {
		return nil, fmt.Errorf("redisq: pull: unexpected batch %v", x)
	}
	tok, _ := strconv.ParseUint(fmt.Sprint(b[0]), 10, 64)
	key, _ := b[1].(string)
	vals, _ := b[2].([]any)
	out := queue.Batch[K]{Key: key, Receipt: queue.BatchReceipt{Lease: tok}, PulledAt: now, Values: make([]queue.Value[K], len(vals))}
	for i, vx := range vals {
		v, _ := vx.([]any)
		if len(v) != 3 {
			return nil, fmt.Errorf("redisq: pull: unexpected value %v", vx)
		}
		raw, _ := v[2].(string)
		var sv sortedValue
		if err := unmarshalStored(raw, &sv); err != nil {
			return nil, fmt.Errorf("value %d undecodable: %w", toInt(v[0]), err)
		}
		sort, err := fromSortPart[K](sv.Sort)
		if err != nil {
			return nil, err
		}
		out.Values[i] = queue.Value[K]{Sort: sort, Payload: sv.Payload, PublishedAt: time.Unix(0, sv.At),
			Deliveries: toCount(v[1])}
	}
	return queue.NewBatch[K](s, out), nil
}

// Ack removes the batch delivered as r for good; ErrLeaseLost if its
// lease ran out or it was settled already.
func (s *Sorted[K]) Ack(r queue.BatchReceipt) error { return s.settle("ack", r.Lease, "") }

// Nack puts the batch's values back at their sort keys; the key is not
// pulled again before delay has passed. Values that have had
// MaxDeliveries go to the dead set instead.
func (s *Sorted[K]) Nack(r queue.BatchReceipt, delay time.Duration) error {
	if delay < 0 {
		return fmt.Errorf("%w: negative nack delay %v", queue.ErrInvalidOptions, delay)
	}
	now := s.o.Clock.Now()
	return s.settleAt(now, "nack", r.Lease, span(now, delay))
}

// Extend sets the batch's lease to run out d from now.
func (s *Sorted[K]) Extend(r queue.BatchReceipt, d time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("%w: lease extension %v is not positive", queue.ErrInvalidOptions, d)
	}
	now := s.o.Clock.Now()
	return s.settleAt(now, "extend", r.Lease, span(now, d))
}

// DeadLetter moves every value of the batch to the dead set.
func (s *Sorted[K]) DeadLetter(r queue.BatchReceipt, reason string) error {
	return s.settle("dead", r.Lease, reason)
}

func (s *Sorted[K]) settle(op string, lease uint64, arg string) error {
	return s.settleAt(s.o.Clock.Now(), op, lease, arg)
}

// settleAt is settle at the time now, which an argument that ends a time
// after now (span) was computed from.
func (s *Sorted[K]) settleAt(now time.Time, op string, lease uint64, arg string) error {
	ctx, cancel := s.opContext()
	defer cancel()
	v, err := s.run(ctx, now, op, strconv.FormatUint(lease, 10), arg)
	if !replied(v, err) {
		return err
	}
	if toInt(v) != 0 { // nothing done, whatever the WAIT after it
		return fmt.Errorf("%w: batch lease %d", queue.ErrLeaseLost, lease)
	}
	return err
}

// sweep is the housekeeper's pass: expire's, with the batches it ended
// unread logged (Options.Logger), not failed, as the pass did its work.
func (s *Sorted[K]) sweep(expire bool) (int, time.Duration, error) {
	n, next, unread, err := s.expire(expire)
	if len(unread) > 0 && s.o.Logger != nil {
		s.o.Logger.Warn("redisq: batch records unreadable; their leases ended", "err", unreadBatches(unread))
	}
	return n, next, err
}

// expire ends expired batch leases (when expire) and releases due holds,
// in calls of up to 1000 leases, until it has caught up. It returns the
// leases it ended, how long until the next deadline (-1: none), and the
// batches among them neither of whose records reads, as the script names
// them (see unreadBatches).
func (s *Sorted[K]) expire(expire bool) (n int, next time.Duration, unread []any, err error) {
	flag := "0"
	if expire {
		flag = "1"
	}
	var short error // ErrNotDurable of a call that did its work: the pass goes on
	for {
		ctx, cancel := s.passContext()
		now := s.o.Clock.Now()
		v, err := s.run(ctx, now, "housekeep", flag)
		cancel()
		if !replied(v, err) {
			return n, -1, unread, err
		}
		short = cmp.Or(short, err)
		r, _ := v.([]any)
		if len(r) != 4 {
			return n, -1, unread, fmt.Errorf("redisq: housekeep: unexpected reply %v", v)
		}
		ended := int(toInt(r[0]))
		n += ended
		u, _ := r[3].([]any)
		unread = append(unread, u...)
		if ended == 1000 {
			continue
		}
		at := toInt(r[2])
		if l := toInt(r[1]); expire && l >= 0 && (at < 0 || l < at) {
			at = l
		}
		if at < 0 {
			return n, -1, unread, short
		}
		return n, max(0, time.UnixMicro(at).Sub(now)), unread, short
	}
}

// unreadBatches is the error, wrapping queue.ErrCorrupt, that names the
// batches whose leases ended with neither their record nor its copy
// readable; unread holds a lease token and a key (nil when unknown) per
// batch. Their values are named nowhere else: they are neither given
// back nor dead-lettered, and stay stored.
func unreadBatches(unread []any) error {
	names := make([]string, 0, len(unread)/2)
	for i := 0; i+1 < len(unread); i += 2 {
		key := "unknown"
		if k, ok := unread[i+1].(string); ok {
			key = strconv.Quote(k)
		}
		names = append(names, fmt.Sprintf("lease %v of key %s", unread[i], key))
	}
	return fmt.Errorf("%w: %d batches ended whose record and its copy cannot be read (%s): their values were not given back",
		queue.ErrCorrupt, len(names), firstFew(names))
}

// RequeueExpired returns the values of every batch whose lease ran out,
// and returns how many leases it ended. Every open handle does this by
// itself unless ManualRequeue is set. A batch neither of whose records
// reads (both garbled by hand) cannot be returned: its lease ends, its
// key is pullable again, and the error, wrapping queue.ErrCorrupt, names
// it, as the housekeeper's log does (Options.Logger).
func (s *Sorted[K]) RequeueExpired() (int, error) {
	n, _, unread, err := s.expire(true)
	if len(unread) > 0 {
		err = errors.Join(unreadBatches(unread), err)
	}
	return n, err
}

// Stats returns the sorted queue's counts; see Queue.Stats.
func (s *Sorted[K]) Stats() queue.Stats {
	ctx, cancel := s.opContext()
	defer cancel()
	st, _ := s.StatsContext(ctx)
	return st
}

// StatsContext is Stats with a context and an error.
func (s *Sorted[K]) StatsContext(ctx context.Context) (queue.Stats, error) {
	now := s.o.Clock.Now()
	st := queue.Stats{Sync: s.o.Sync, AckTimeout: s.o.AckTimeout, At: now, Closed: s.isClosed()}
	v, err := s.run(ctx, now, "stats")
	if err != nil {
		st.Closed = st.Closed || errors.Is(err, queue.ErrClosed)
		return st, err
	}
	r, _ := v.([]any)
	if len(r) != 9 {
		return st, fmt.Errorf("redisq: stats: unexpected reply %v", v)
	}
	st.SortedPending, st.SortedKeys, st.SortedBatches, st.SortedDead = int(toInt(r[0])), int(toInt(r[1])), int(toInt(r[2])), int(toInt(r[3]))
	var damage [3]error
	st.Published, damage[0] = total("published", toInt(r[4]), "written by hand")
	st.Pulled, damage[1] = total("pulled", toInt(r[5]), "written by hand")
	st.BatchesAcked, damage[2] = total("acked", toInt(r[6]), "written by hand")
	st.CountsErr = errors.Join(damage[:]...)
	st.SortedLeased = int(toInt(r[7]))
	st.OldestEnqueuedAt, st.OldestErr = sortedOldest(r[8])
	return st, nil
}

// sortedOldest reads the oldest value's publish time from the stats
// reply o (scripts/sorted.lua, oldest): zero when there is none or it is
// unknown (values published by an earlier version of this package are
// pending or leased), and an error wrapping queue.ErrCorrupt naming the
// value when its stored record names no publish time.
func sortedOldest(o any) (time.Time, error) {
	r, _ := o.([]any)
	if len(r) != 2 {
		return time.Time{}, fmt.Errorf("redisq: stats: unexpected oldest value %v", o)
	}
	kind, _ := r[0].(string)
	val, _ := r[1].(string)
	switch {
	case kind == "t" && len(val) == 8:
		return time.Unix(0, int64(binary.BigEndian.Uint64([]byte(val)))), nil
	case kind == "u":
		return time.Time{}, fmt.Errorf("%w: redisq: stats: the record of value %s, the oldest pending or leased one, names no publish time", queue.ErrCorrupt, val)
	}
	return time.Time{}, nil
}

// WindowOptions configures a windowed queue handle.
type WindowOptions struct {
	SortedOptions
	// Window is how long after its oldest pending value was published a
	// key's batch becomes due. Required; every handle must agree on it.
	Window time.Duration
}

// Windowed batches values per key by time, as queue.Windowed: a key's
// batch is due Window after its oldest pending value was published. The
// publish time is the publishing client's clock.
type Windowed struct {
	*Sorted[time.Time]
}

var _ queue.WindowedQueue = (*Windowed)(nil)

// OpenWindowed returns a handle on the windowed queue called name.
func OpenWindowed(ctx context.Context, rdb redis.UniversalClient, name string, opts *WindowOptions) (*Windowed, error) {
	if opts == nil || opts.Window <= 0 {
		return nil, fmt.Errorf("%w: WindowOptions.Window must be positive", queue.ErrInvalidOptions)
	}
	s, err := openSorted[time.Time](ctx, rdb, name, opts.SortedOptions, opts.Window)
	if err != nil {
		return nil, err
	}
	return &Windowed{s}, nil
}

// Publish adds a value under key, stamped with the current time: its sort
// key and its PublishedAt are one reading of the clock, so that its key is
// due Window after its PublishedAt. Its errors are those of
// Sorted.Publish: ErrMayHaveRun when ctx ended while its call was in
// flight, and a Publish sent again then may publish the value twice.
func (w *Windowed) Publish(ctx context.Context, key string, payload []byte) error {
	now := w.o.Clock.Now()
	part, err := sortPart(now)
	if err != nil {
		return err
	}
	return w.publish(ctx, now, part, key, payload)
}
