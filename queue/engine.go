package queue

import (
	"context"
	"time"
)

// The method sets every engine of walq offers: the embedded queue of this
// package and the Redis backend (module github.com/walq/walq/redisq). Code
// written against these interfaces runs on either; switching engines is
// changing the Open call. Package queuetest checks an engine against the
// guarantees documented here and in the package documentation.

// Settler ends or extends one delivery of an ack queue, named by its
// receipt. Message's methods call it.
type Settler interface {
	// Ack removes the message for good; ErrLeaseLost if the delivery no
	// longer owns it.
	Ack(r Receipt) error
	// Nack gives the message back, ready after delay, or dead once it has
	// had MaxDeliveries.
	Nack(r Receipt, delay time.Duration) error
	// Extend sets the lease to run out d from now, d of any positive
	// length: shorter than what is left ends it sooner; a d that is not
	// positive is refused with ErrInvalidOptions.
	Extend(r Receipt, d time.Duration) error
	// DeadLetter moves the message to the dead-letter set with a reason.
	DeadLetter(r Receipt, reason string) error
}

// AckQueue is an ack queue with leases, competing consumers, dead letters
// and producer-id dedup. *Queue is one; redisq.Queue is another.
type AckQueue interface {
	Enqueue(ctx context.Context, payload []byte, opts ...EnqueueOption) (string, error)
	EnqueueBatch(ctx context.Context, items []Item) ([]string, error)
	Dequeue(ctx context.Context) (*Message, error)
	TryDequeue() (*Message, error)
	// DequeueBatch may return messages and an error together: process
	// (settle) the messages, then handle the error. The engines differ
	// in what they do with a message they cannot read beside others:
	// *Queue leaves it leased and returns the others with a *ReadError
	// naming it (an embedded read error may be an I/O error, not damage);
	// redisq dead-letters it with a "corrupt record: " reason and returns
	// the others with a nil error.
	DequeueBatch(ctx context.Context, max int) (Messages, error)
	Settler
	AckID(id string) error
	NackID(id string, delay time.Duration) error
	ExtendID(id string, d time.Duration) error
	DeadLetterID(id, reason string) error
	DeadLetters(from uint64, max int) ([]DeadLetter, error)
	// RequeueDead and RequeueAllDead differ on a dead letter listed as
	// a corrupt record: *Queue reads each letter first and refuses one
	// it cannot read (RequeueAllDead requeues the others and reports
	// it); redisq requeues it, and a dequeue that cannot read it
	// dead-letters it again.
	RequeueDead(id string) error
	PurgeDead(id string) error
	RequeueAllDead() (int, error)
	PurgeAllDead() (int, error)
	RequeueExpired() (int, error)
	Stats() Stats
	Close() error
}

// BatchSettler ends or extends one leased batch of a sorted or windowed
// queue, named by its receipt. Batch's methods call it.
type BatchSettler interface {
	Ack(r BatchReceipt) error
	Nack(r BatchReceipt, delay time.Duration) error
	Extend(r BatchReceipt, d time.Duration) error
	DeadLetter(r BatchReceipt, reason string) error
}

// DeadValueSet lists, requeues and purges the dead values of a sorted or
// windowed queue, named by their Seq (and, fenced, their PublishedAt), as
// *Sorted[K] documents them. A handle opened with Options.ReadOnly lists
// them and refuses the others with ErrReadOnly.
//
// The engines differ on a dead value whose stored payload cannot be read:
// *Sorted reads each value first and refuses one it cannot read
// (RequeueAllDead requeues the others and reports it); redisq requeues
// it, and a pull that cannot read it dead-letters it again. redisq also
// refuses, with an error wrapping ErrCorrupt, to requeue a value
// dead-lettered by a handle of a release before it recorded the value's
// key (DeadValues lists it with an empty Key and a reason saying so);
// such a value can be purged.
type DeadValueSet[K SortKey] interface {
	DeadValues(from uint64, max int) ([]DeadValue[K], error)
	RequeueDead(seq uint64) error
	PurgeDead(seq uint64) error
	RequeueDeadValue(d DeadValue[K]) error
	PurgeDeadValue(d DeadValue[K]) error
	RequeueAllDead() (int, error)
	PurgeAllDead() (int, error)
}

// SortedQueue is a queue of values ordered by a sort key of type K and
// pulled as whole keys. *Sorted[K] is one.
type SortedQueue[K SortKey] interface {
	Publish(ctx context.Context, sort K, key string, payload []byte) error
	// Pull and TryPull may return batches and an error together, as
	// AckQueue.DequeueBatch may: process the batches, then handle the
	// error.
	Pull(ctx context.Context, max int) ([]*Batch[K], error)
	TryPull(max int) ([]*Batch[K], error)
	BatchSettler
	RequeueExpired() (int, error)
	DeadValueSet[K]
	Stats() Stats
	Close() error
}

// WindowedQueue is a sorted queue whose sort key is the publish time.
// *Windowed is one.
type WindowedQueue interface {
	Publish(ctx context.Context, key string, payload []byte) error
	// Pull and TryPull may return batches and an error together, as
	// AckQueue.DequeueBatch may: process the batches, then handle the
	// error.
	Pull(ctx context.Context, max int) ([]*Batch[time.Time], error)
	TryPull(max int) ([]*Batch[time.Time], error)
	BatchSettler
	RequeueExpired() (int, error)
	DeadValueSet[time.Time]
	Stats() Stats
	Close() error
}

// Compile-time checks that the embedded engine offers every method set.
var (
	_ AckQueue               = (*Queue)(nil)
	_ SortedQueue[int64]     = (*Sorted[int64])(nil)
	_ SortedQueue[string]    = (*Sorted[string])(nil)
	_ SortedQueue[time.Time] = (*Sorted[time.Time])(nil)
	_ WindowedQueue          = (*Windowed)(nil)
	_ BatchSettler           = (*Sorted[float64])(nil)
)

// NewMessage returns a copy of m whose Ack, Nack, Extend and DeadLetter
// call s with m.Receipt. It is for engines outside this package; the
// embedded queue binds its messages itself.
func NewMessage(s Settler, m Message) *Message {
	m.q, m.s = nil, s
	return &m
}

// NewBatch returns a copy of b whose Ack, Nack, Extend and DeadLetter call
// s with b.Receipt. It is for engines outside this package.
func NewBatch[K SortKey](s BatchSettler, b Batch[K]) *Batch[K] {
	b.q, b.s = nil, s
	return &b
}
