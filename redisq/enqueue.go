package redisq

import (
	"context"
	"fmt"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/walq/walq/internal/msgid"
	"github.com/walq/walq/queue"
)

// body is a message as stored in the body hash; only clients read it.
type body struct {
	_msgpack struct{} `msgpack:",as_array"` //nolint:unused // msgpack's layout tag

	ID      string            // message id
	At      int64             // enqueue time, Unix nanoseconds
	Headers map[string]string // nil when none
	Payload []byte            // the message body
}

// Enqueue adds a message and returns its id. It returns once the server
// has run the enqueue (and, with Replicas, once the replicas have it).
func (q *Queue) Enqueue(ctx context.Context, payload []byte, opts ...queue.EnqueueOption) (string, error) {
	it := queue.Item{Payload: payload}
	for _, o := range opts {
		o(&it)
	}
	ids, err := q.EnqueueBatch(ctx, []queue.Item{it})
	if err != nil {
		return "", err
	}
	return ids[0], nil
}

// EnqueueBatch adds the items in order in one script and returns their
// ids. If any id is a duplicate (ErrDuplicate) or any item is invalid,
// none is enqueued; the batch is all or nothing, also across a crash of
// the server.
func (q *Queue) EnqueueBatch(ctx context.Context, items []queue.Item) ([]string, error) {
	if len(items) == 0 {
		return nil, nil
	}
	now := q.o.Clock.Now()
	args := make([]any, 0, 1+4*len(items))
	args = append(args, len(items))
	ids := make([]string, len(items))
	for i, it := range items {
		if len(it.Payload) > q.o.MaxMessageSize {
			return nil, fmt.Errorf("%w: %d bytes, limit %d", queue.ErrTooLarge, len(it.Payload), q.o.MaxMessageSize)
		}
		producer := 1
		if it.ID == "" {
			it.ID, producer = msgid.New(), 0
		}
		due := it.DeliverAt
		if it.Delay > 0 {
			due = now.Add(it.Delay)
		}
		dueArg := "0"
		if due.After(now) {
			dueArg = unixMicros(due)
		}
		if len(it.Headers) == 0 {
			it.Headers = nil
		}
		b, err := msgpack.Marshal(&body{ID: it.ID, At: now.UnixNano(), Headers: it.Headers, Payload: it.Payload})
		if err != nil {
			return nil, fmt.Errorf("redisq: encode message: %w", err)
		}
		ids[i] = it.ID
		args = append(args, it.ID, producer, dueArg, b)
	}
	if _, err := q.run(ctx, fnEnqueue, now, args...); err != nil {
		return nil, scriptErr("enqueue", err)
	}
	return ids, nil
}
