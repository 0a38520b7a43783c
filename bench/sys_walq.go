package main

import (
	"context"
	"fmt"
	"time"

	"github.com/walq/walq/queue"
)

// walqAckTimeout is the lease a delivery gets before it is redelivered; the
// workloads ack within microseconds, so it never fires. walqSyncInterval is
// the period of SyncInterval (the library's default, set here to print it).
const (
	walqAckTimeout   = 30 * time.Second
	walqSyncInterval = 50 * time.Millisecond
)

// walqModes maps a walq system's mode to its sync mode.
var walqModes = map[string]queue.SyncMode{
	"always": queue.SyncAlways, "interval": queue.SyncInterval, "never": queue.SyncNever,
}

// walqOptions returns the options every walq system opens with.
func walqOptions(mode string) queue.Options {
	return queue.Options{Sync: walqModes[mode], SyncInterval: walqSyncInterval, AckTimeout: walqAckTimeout}
}

func walqSystems() []System {
	mk := func(mode string, durable, bulk bool, what string) System {
		return System{
			Name: "walq/" + mode, Family: "walq", Mode: mode, Kind: KindQueue,
			Durable: durable, Bulk: bulk, FIFO: true, Reader: "walq/never",
			Config: func(Hint) string {
				return fmt.Sprintf("%s; AckTimeout=%v; other options default; Enqueue, Dequeue, Ack one at a time",
					what, walqAckTimeout)
			},
			Open: func(dir string, _ Hint) (Queue, error) { return openWalq(dir, mode) },
		}
	}
	return []System{
		mk("always", true, false, "SyncAlways (default): Enqueue returns after the group commit's fsync"),
		mk("interval", false, false,
			fmt.Sprintf("SyncInterval=%v: Enqueue returns after the write, fsync at most every period", walqSyncInterval)),
		mk("never", false, true, "SyncNever: fsync at segment roll-over and Close only"),
	}
}

type walqQueue struct{ q *queue.Queue }

func openWalq(dir, mode string) (*walqQueue, error) {
	opts := walqOptions(mode)
	q, err := queue.Open(dir, &opts)
	if err != nil {
		return nil, err
	}
	return &walqQueue{q}, nil
}

func (w *walqQueue) Enqueue(ctx context.Context, payload []byte) error {
	_, err := w.q.Enqueue(ctx, payload)
	return err
}

func (w *walqQueue) NewConsumer() (Consumer, error) { return walqConsumer{w.q}, nil }

func (w *walqQueue) Close() error { return w.q.Close() }

// walqConsumer is a consuming goroutine's handle: walq's queue is safe for
// any number of consuming goroutines.
type walqConsumer struct{ q *queue.Queue }

func (c walqConsumer) Dequeue(ctx context.Context) (Delivery, error) {
	m, err := c.q.Dequeue(ctx)
	if err != nil {
		return nil, err
	}
	return walqDelivery{m}, nil
}

func (c walqConsumer) Close() error { return nil }

type walqDelivery struct{ m *queue.Message }

func (d walqDelivery) Payload() []byte { return d.m.Payload }
func (d walqDelivery) Ack() error      { return d.m.Ack() }
