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

// walqStreamBatch is how many messages a walq/stream consumer leases at once.
const walqStreamBatch = 64

// walqStreamSystem is walq's streaming API under the sync mode named
// ("always": walq/stream; "never": walq/never-stream): producers enqueue
// with EnqueueAsync and wait for every Pending at the end of their run
// (Flush, timed); consumers lease with DequeueBatch and settle each
// batch's acks in one SettleAsync.
func walqStreamSystem(mode string) System {
	s := System{
		Name: "walq/stream", Family: "walq", Mode: "stream", Kind: KindQueue,
		Durable: true, FIFO: true, Reader: "walq/never",
		Config: func(Hint) string { return walqStreamConfig(mode) },
	}
	if mode == "never" { // no durable enqueue; bulk loads and the sorted queue are walq/never's
		s.Name, s.Mode, s.Durable, s.Workloads = "walq/never-stream", "never-stream", false, []string{wDrain, wCycle}
	}
	s.Open = func(dir string, _ Hint) (Queue, error) {
		w, err := openWalq(dir, mode)
		if err != nil {
			return nil, err
		}
		return &walqStream{w}, nil
	}
	return s
}

// walqStreamConfig is the printed configuration of the streaming system
// of a sync mode.
func walqStreamConfig(mode string) string {
	sync, stored := "SyncAlways (default)", "durable"
	if mode == "never" {
		sync, stored = "SyncNever: fsync at segment roll-over and Close only", "written"
	}
	return fmt.Sprintf("%s; AckTimeout=%v; MaxPending default (4096); "+
		"EnqueueAsync, each producer ends with Flush (timed: its messages are %s when it stops); "+
		"per-message latency is the EnqueueAsync call; consumers DequeueBatch(%d) and settle a batch's acks "+
		"in one SettleAsync before leasing the next; the run's last acks are waited for by Flush",
		sync, walqAckTimeout, stored, walqStreamBatch)
}

// walqStream is the adapter of walq/stream and walq/never-stream: a
// walqQueue whose Enqueue does not wait for the commit.
type walqStream struct{ *walqQueue }

func (w *walqStream) Enqueue(ctx context.Context, payload []byte) error {
	_, err := w.q.EnqueueAsync(ctx, payload)
	return err
}

// Flush waits until every message enqueued so far is as durable as the
// sync mode promises (SyncNever: written); produce
// calls it at the end of each producer's run.
func (w *walqStream) Flush(ctx context.Context) error { return w.q.Flush(ctx) }

// Settle waits for the consumers' asynchronous acks.
func (w *walqStream) Settle(ctx context.Context) error { return w.q.Flush(ctx) }

// DequeueOne leases a single message, whose Ack is an AckAsync: a lone
// dequeue must not leave a batch leased behind it.
func (w *walqStream) DequeueOne(ctx context.Context) (Delivery, error) {
	m, err := w.q.Dequeue(ctx)
	if err != nil {
		return nil, err
	}
	return walqAsyncDelivery{m}, nil
}

type walqAsyncDelivery struct{ m *queue.Message }

func (d walqAsyncDelivery) Payload() []byte { return d.m.Payload }
func (d walqAsyncDelivery) Ack() error {
	_, err := d.m.AckAsync()
	return err
}

func (w *walqStream) NewConsumer() (Consumer, error) { return &walqBatchConsumer{q: w.q}, nil }

// walqBatchConsumer leases up to walqStreamBatch messages at once and
// hands them out one by one; the acks of a batch are collected and
// settled in one SettleAsync when the next batch is leased or the
// consumer closes.
type walqBatchConsumer struct {
	q     *queue.Queue
	ready queue.Messages  // leased, not yet handed out
	acked []queue.Receipt // acked by the caller, not yet settled
}

func (c *walqBatchConsumer) Dequeue(ctx context.Context) (Delivery, error) {
	if len(c.ready) == 0 {
		if err := c.settle(); err != nil {
			return nil, err
		}
		ms, err := c.q.DequeueBatch(ctx, walqStreamBatch)
		if err != nil {
			return nil, err
		}
		c.ready = ms
	}
	m := c.ready[0]
	c.ready = c.ready[1:]
	return walqBatchDelivery{c: c, m: m}, nil
}

// settle appends the collected acks in one commit, without waiting for it.
func (c *walqBatchConsumer) settle() error {
	if len(c.acked) == 0 {
		return nil
	}
	ss := make([]queue.Settlement, len(c.acked))
	for i, r := range c.acked {
		ss[i] = queue.Settlement{Receipt: r, Op: queue.SettleAck}
	}
	c.acked = c.acked[:0]
	_, err := c.q.SettleAsync(ss...)
	return err
}

// Close settles what was acked; messages leased and not handed out go back
// when their lease runs out (the workloads hand out everything they lease).
func (c *walqBatchConsumer) Close() error { return c.settle() }

type walqBatchDelivery struct {
	c *walqBatchConsumer
	m *queue.Message
}

func (d walqBatchDelivery) Payload() []byte { return d.m.Payload }

// Ack collects the receipt for the batch's SettleAsync.
func (d walqBatchDelivery) Ack() error {
	d.c.acked = append(d.c.acked, d.m.Receipt)
	return nil
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
		walqStreamSystem("always"),
		walqStreamSystem("never"),
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

// replayed says what the open replayed.
func (w *walqQueue) replayed() (string, bool) {
	r := w.q.Recovery()
	return fmt.Sprintf("replayed %d records after snapshot LSN %d, requeued %d, torn tail cut %v",
		r.Replayed, r.SnapshotLSN, r.Requeued, r.Log.Torn != nil), r.Clean
}

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
