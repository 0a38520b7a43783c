package queue

import (
	"context"
	"fmt"
	"time"
)

// SortedOptions configures a sorted queue. A nil *SortedOptions means the
// defaults.
type SortedOptions struct {
	// Options are the engine's options: AckTimeout (the lease of a pulled
	// batch), MaxDeliveries, Sync, and the rest.
	Options
	// SingleFlight keeps a key that has a leased batch from being pulled
	// again until that batch is acked or returned, so that a key's
	// batches are handled in order, one at a time.
	SingleFlight bool
	// CacheBytes is how many payload bytes of pending values are kept in
	// memory; the rest are read back from the log when pulled. Default
	// 32 MiB; negative means none.
	CacheBytes int64
}

// Sorted is a durable queue of values ordered by a sort key of type K and
// pulled in batches grouped by a message key. A key's place in the order is
// the smallest sort key among its pending values; Pull returns whole keys
// in that order, each with all its pending values in sort order. Sort keys
// compare as cmp.Compare has them (strings by their bytes, times by their
// instant), except that a float -0 comes before +0 (a NaN is refused);
// keys whose places are equal come in the byte order of their names, and
// a key's values with equal sort keys in publish order. The Redis engine
// (redisq) orders alike. A pulled
// batch is leased like a message of the ack queue: Ack removes it; Nack,
// an expired lease or a crash puts its values back at their original sort
// keys; after MaxDeliveries the values go to the dead set. A pending value
// that already had MaxDeliveries (made pending by an open with a higher
// limit or none) goes to the dead set when a pull would take its key,
// instead of being pulled; the key's other values are pulled.
//
// It is safe for concurrent use by any number of publishers and pullers.
type Sorted[K SortKey] struct {
	q      *Queue        // the engine: log, indexes, housekeeper
	window time.Duration // windowed form: a key is due Window after its oldest value
}

// Batch is one key's values, pulled and leased together.
type Batch[K SortKey] struct {
	Key      string       // the message key
	Values   []Value[K]   // the key's values, in sort order
	Receipt  BatchReceipt // names this delivery of the batch
	PulledAt time.Time    // when it was pulled

	q *Queue // the queue it came from

	s BatchSettler // another engine's settler (NewBatch); used when q is nil
}

// Value is one published value in a batch.
type Value[K SortKey] struct {
	Sort        K         // its sort key
	Payload     []byte    // its payload, the consumer's own copy
	PublishedAt time.Time // when it was published
	Deliveries  int       // times pulled, this one included
}

// Payloads returns the batch's payloads in sort order.
func (b *Batch[K]) Payloads() [][]byte {
	out := make([][]byte, len(b.Values))
	for i, v := range b.Values {
		out[i] = v.Payload
	}
	return out
}

// OpenSorted opens the sorted queue in dir, creating it if needed. The
// directory must always be opened with the same K.
func OpenSorted[K SortKey](dir string, opts *SortedOptions) (*Sorted[K], error) {
	q, err := openSorted(dir, opts, Identity{Kind: KindSorted, SortKey: sortKeyType[K]()})
	if err != nil {
		return nil, err
	}
	return &Sorted[K]{q: q}, nil
}

func openSorted(dir string, opts *SortedOptions, id Identity) (*Queue, error) {
	var so SortedOptions
	if opts != nil {
		so = *opts
	}
	o := so.Options
	o.ident = id
	o.singleFlight = so.SingleFlight
	switch {
	case so.CacheBytes == 0:
		o.cacheBytes = 32 << 20
	case so.CacheBytes > 0:
		o.cacheBytes = so.CacheBytes
	}
	return Open(dir, &o)
}

// Publish adds a value under key at sort position sort. Under SyncAlways it
// returns after the value is durable. A NaN, or a time.Time outside the
// years 1678 to 2262 (such as the zero time), is refused with
// ErrInvalidOptions.
func (s *Sorted[K]) Publish(ctx context.Context, sort K, key string, payload []byte) error {
	enc, err := encodeSort(sort)
	if err != nil {
		return err
	}
	return s.q.publish(ctx, enc, key, payload, s.q.now())
}

// Pull returns the batches of up to about max values, keys in order of
// their smallest pending sort key. Keys are never split: Pull stops once
// it has max values or more, so the last batch may take it past max (a key
// with more than max pending values comes whole, alone). It blocks until a
// key can be pulled, ctx ends or the queue is closed. On a poisoned log
// it returns no batch and the error that poisoned it, at once, and a Pull
// asleep when the log is poisoned, whatever poisoned it, wakes to return
// it (as Dequeue does; a windowed queue's Pull too).
//
// A batch with a value whose payload cannot be read is not returned; the
// other batches are, with an error (ErrCorrupt, or another read error)
// that holds a *ReadError naming it (key, value seq, receipt): process
// and settle them as usual, then handle the error. The unreadable batch
// stays leased until AckTimeout, then comes back and is dead-lettered at
// MaxDeliveries, unless the caller dead-letters it first
// (Sorted.DeadLetter with the ReadError's Receipt).
func (s *Sorted[K]) Pull(ctx context.Context, max int) ([]*Batch[K], error) {
	return s.pull(ctx, max, true)
}

// TryPull is Pull without waiting: ErrEmpty when no key can be pulled and
// the log is healthy; on a poisoned log, the error that poisoned it. It
// returns batches beside an unreadable one with an error, as Pull does.
func (s *Sorted[K]) TryPull(max int) ([]*Batch[K], error) {
	return s.pull(context.Background(), max, false)
}

// RequeueExpired returns the values of every batch whose lease ran out;
// the queue does this by itself unless ManualRequeue is set.
func (s *Sorted[K]) RequeueExpired() (int, error) { return s.q.RequeueExpired() }

// Stats returns counts, sizes and log positions.
func (s *Sorted[K]) Stats() Stats { return s.q.Stats() }

// Recovery returns what Open found and did.
func (s *Sorted[K]) Recovery() Recovery { return s.q.Recovery() }

// Compact takes a snapshot now and truncates the log.
func (s *Sorted[K]) Compact() error { return s.q.Compact() }

// Close closes the queue; see Queue.Close.
func (s *Sorted[K]) Close() error { return s.q.Close() }

// Ack removes the batch for good. ErrLeaseLost if its lease ran out. On a
// poisoned log every batch settle (Ack, Nack, Extend, DeadLetter, by Batch
// or by receipt) returns the error that poisoned it, before any refusal
// of its own (ErrLeaseLost, an invalid argument), as Queue.Settle does.
func (b *Batch[K]) Ack() error {
	if b.q == nil {
		return b.s.Ack(b.Receipt)
	}
	return b.q.ackBatch(b.Receipt.Lease)
}

// Nack puts the batch's values back at their sort keys; the key is not
// pulled again before delay has passed, nor before the end of a longer
// delay of a nack of its other batch since its last pull (without
// SingleFlight a key may have several). Values that have had
// MaxDeliveries go to the dead set instead; when all of them do, the
// delay holds nothing back: a value published to the key since is pulled
// as if no nack had been made. The delay is judged by the queue's clock
// at each pull (and Stats) until the key is pulled again or has no value
// left: after a step back of the clock, a key whose delay had passed and
// that was not pulled since is held again until its time comes by the new
// clock, and a crash changes neither.
func (b *Batch[K]) Nack(delay time.Duration) error {
	if b.q == nil {
		return b.s.Nack(b.Receipt, delay)
	}
	return b.q.nackBatch(b.Receipt.Lease, delay)
}

// Extend sets the batch's lease to run out d from now.
func (b *Batch[K]) Extend(d time.Duration) error {
	if b.q == nil {
		return b.s.Extend(b.Receipt, d)
	}
	return b.q.extendBatch(b.Receipt.Lease, d)
}

// DeadLetter moves all the batch's values to the dead set.
func (b *Batch[K]) DeadLetter(reason string) error {
	if b.q == nil {
		return b.s.DeadLetter(b.Receipt, reason)
	}
	return b.q.deadBatch(b.Receipt.Lease, reason)
}

// Ack acks the batch delivered as r (Batch.Receipt), for a process that
// holds the receipt but not the Batch. Receipts survive a clean Close.
func (s *Sorted[K]) Ack(r BatchReceipt) error {
	if err := s.q.checkBatchReceipt(r); err != nil {
		return err
	}
	return s.q.ackBatch(r.Lease)
}

// Nack is Batch.Nack by receipt.
func (s *Sorted[K]) Nack(r BatchReceipt, delay time.Duration) error {
	if err := s.q.checkBatchReceipt(r); err != nil {
		return err
	}
	return s.q.nackBatch(r.Lease, delay)
}

// Extend is Batch.Extend by receipt.
func (s *Sorted[K]) Extend(r BatchReceipt, d time.Duration) error {
	if err := s.q.checkBatchReceipt(r); err != nil {
		return err
	}
	return s.q.extendBatch(r.Lease, d)
}

// DeadLetter is Batch.DeadLetter by receipt.
func (s *Sorted[K]) DeadLetter(r BatchReceipt, reason string) error {
	if err := s.q.checkBatchReceipt(r); err != nil {
		return err
	}
	return s.q.deadBatch(r.Lease, reason)
}

// Identity returns what the queue's directory says it holds.
func (s *Sorted[K]) Identity() Identity { return s.q.Identity() }

// InUse is Queue.InUse: a read-only queue opened beside a running one.
func (s *Sorted[K]) InUse() bool { return s.q.InUse() }

// WindowOptions configures a windowed queue.
type WindowOptions struct {
	SortedOptions
	// Window is how long after its oldest pending value was published a
	// key's batch becomes due. Required.
	Window time.Duration
}

// Windowed batches values per key by time: a key's batch is due Window
// after its oldest pending value was published; values published after the
// batch was pulled start a new window. It is a Sorted queue whose sort key
// is the publish time.
type Windowed struct {
	*Sorted[time.Time]
}

// OpenWindowed opens the windowed queue in dir.
func OpenWindowed(dir string, opts *WindowOptions) (*Windowed, error) {
	if opts == nil || opts.Window <= 0 {
		return nil, fmt.Errorf("%w: WindowOptions.Window must be positive", ErrInvalidOptions)
	}
	q, err := openSorted(dir, &opts.SortedOptions, Identity{Kind: KindWindowed, SortKey: "time"})
	if err != nil {
		return nil, err
	}
	return &Windowed{&Sorted[time.Time]{q: q, window: opts.Window}}, nil
}

// Publish adds a value under key, stamped with the current time: the
// queue's own reading of its clock, the one Pull judges windows by, so
// that the value's batch is due Window after its publish by that clock,
// even just after a step of the system's wall clock.
func (w *Windowed) Publish(ctx context.Context, key string, payload []byte) error {
	at := w.q.now() // the sort key and the PublishedAt: one reading
	enc, err := encodeSort(time.Unix(0, at))
	if err != nil {
		return err
	}
	return w.q.publish(ctx, enc, key, payload, at)
}
