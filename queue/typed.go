package queue

import (
	"context"
	"fmt"

	"github.com/vmihailenco/msgpack/v5"
)

// Typed is a view of a Queue whose payloads are values of type T, encoded
// with msgpack.
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
	if err := msgpack.Unmarshal(m.Payload, &v); err != nil {
		return v, m, fmt.Errorf("queue: decode %T from message %s: %w", v, m.ID, err)
	}
	return v, m, nil
}
