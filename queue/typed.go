package queue

import (
	"context"
	"errors"
	"fmt"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/walq/walq/internal/msgframe"
)

// Typed is a view of a Queue whose payloads are values of type T, encoded
// with msgpack.
//
// Payloads may come from any producer, so a payload is decoded only once
// its msgpack framing fits it: a payload whose headers claim more bytes or
// elements than it holds, whose arrays and maps nest more than 10000 deep,
// or whose bytes after its first value are not whole msgpack values, does
// not decode. Decoding a payload thus allocates no more than its length
// times the size of the largest element type of T, however it was
// damaged; but the bytes of a msgpack extension are not checked, so a
// decoder registered for one (msgpack.RegisterExt, RegisterExtDecoder)
// that decodes msgpack from them has to bound that itself.
type Typed[T any] struct {
	Q *Queue // the underlying queue
}

// NewTyped returns a typed view of q.
func NewTyped[T any](q *Queue) Typed[T] { return Typed[T]{Q: q} }

// Enqueue encodes v and enqueues it.
func (t Typed[T]) Enqueue(ctx context.Context, v T, opts ...EnqueueOption) (string, error) {
	b, err := msgpack.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("queue: encode %T: %w", v, err)
	}
	return t.Q.Enqueue(ctx, b, opts...)
}

// EnqueueAsync encodes v and enqueues it without waiting for the commit;
// see Queue.EnqueueAsync.
func (t Typed[T]) EnqueueAsync(ctx context.Context, v T, opts ...EnqueueOption) (*Pending, error) {
	b, err := msgpack.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("queue: encode %T: %w", v, err)
	}
	return t.Q.EnqueueAsync(ctx, b, opts...)
}

// DequeueBatch is Queue.DequeueBatch that decodes each payload into a T;
// vs[i] is the value of ms[i]. Payloads that do not decode leave a zero
// value, and the error holds a *BatchError naming them (get it with
// errors.As: beside a read error it is joined to it, not the error
// itself); every message is returned, so the caller still owns them all
// (and should dead-letter those). Settle the batch with ms.Ack(),
// ms.Nack(d) or Queue.Settle. A message whose payload cannot be read is
// left out, leased, and named by a *ReadError in the error, as
// Queue.DequeueBatch leaves it out: process what is returned, then handle
// the error.
func (t Typed[T]) DequeueBatch(ctx context.Context, max int) ([]T, Messages, error) {
	ms, err := t.Q.DequeueBatch(ctx, max)
	if len(ms) == 0 {
		return nil, nil, err
	}
	vs := make([]T, len(ms))
	var errs []error
	for i, m := range ms {
		if err := decodePayload(m.Payload, &vs[i]); err != nil {
			if errs == nil {
				errs = make([]error, len(ms))
			}
			errs[i] = fmt.Errorf("queue: decode %T from message %s: %w", vs[i], m.ID, err)
		}
	}
	if errs != nil && err != nil {
		return vs, ms, errors.Join(err, &BatchError{Errs: errs})
	}
	if errs != nil {
		return vs, ms, &BatchError{Errs: errs}
	}
	return vs, ms, err // err: a message not returned beside them (see Queue.DequeueBatch)
}

// Dequeue is Queue.Dequeue that decodes the payload into a T. A payload
// that does not decode is returned with the error; the caller still owns
// the message and should dead-letter it.
func (t Typed[T]) Dequeue(ctx context.Context) (T, *Message, error) {
	m, err := t.Q.Dequeue(ctx)
	return decodeTyped[T](m, err)
}

// TryDequeue is Queue.TryDequeue that decodes the payload into a T.
func (t Typed[T]) TryDequeue() (T, *Message, error) {
	m, err := t.Q.TryDequeue()
	return decodeTyped[T](m, err)
}

func decodeTyped[T any](m *Message, err error) (T, *Message, error) {
	var v T
	if err != nil {
		return v, nil, err
	}
	if err := decodePayload(m.Payload, &v); err != nil {
		return v, m, fmt.Errorf("queue: decode %T from message %s: %w", v, m.ID, err)
	}
	return v, m, nil
}

// decodePayload decodes payload into v, once its framing is checked:
// msgpack allocates what a header claims before reading what follows.
// Every value in the payload is checked, not only the first: a type's own
// decoder (msgpack's CustomDecoder) may read more values than the headers
// count.
func decodePayload(payload []byte, v any) error {
	if err := msgframe.CheckAll(payload); err != nil {
		return err
	}
	return msgpack.Unmarshal(payload, v)
}
