package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/joncrlsn/dque"
)

// dqueSegmentItems is dque's itemsPerSegment. dque keeps the first and the
// last segment in memory and deletes a segment file once all its items are
// dequeued; its examples use 50–100, which makes millions of files for a
// large backlog, so we use 1000 (1 MiB segments at 1 KiB payloads).
const dqueSegmentItems = 1000

// dqueItem is the struct dque gob-encodes; dque stores only structs.
type dqueItem struct {
	Data []byte
}

func dqueSystems() []System {
	mk := func(turbo bool) System {
		mode := "safe"
		cfg := "default safe mode: fsync per enqueue and per dequeue"
		if turbo {
			mode = "turbo"
			cfg = "TurboOn: the OS decides when to write back (no fsync)"
		}
		return System{
			Name: "dque/" + mode, Family: "dque", Mode: mode, Kind: KindQueue,
			Durable: !turbo, Bulk: turbo, FIFO: true, Reader: "dque/turbo",
			Config: func(Hint) string {
				return fmt.Sprintf("%s; itemsPerSegment=%d; no ack (dequeue removes); gob-encoded struct{Data []byte}",
					cfg, dqueSegmentItems)
			},
			Open: func(dir string, _ Hint) (Queue, error) { return openDque(dir, turbo) },
		}
	}
	return []System{mk(false), mk(true)}
}

// dqueQueue adapts a *dque.DQue. dque's own blocking dequeue cannot be
// cancelled, so the adapter wakes its consumers itself.
type dqueQueue struct {
	q     *dque.DQue
	ready *wakeup // broadcast after every enqueue
}

func openDque(dir string, turbo bool) (*dqueQueue, error) {
	q, err := dque.NewOrOpen("bench", dir, dqueSegmentItems, func() interface{} { return &dqueItem{} })
	if err != nil {
		return nil, fmt.Errorf("dque: open %s: %w", dir, err)
	}
	if turbo {
		if err := q.TurboOn(); err != nil {
			return nil, errors.Join(fmt.Errorf("dque: turbo on: %w", err), q.Close())
		}
	}
	return &dqueQueue{q: q, ready: newWakeup()}, nil
}

func (d *dqueQueue) Enqueue(_ context.Context, payload []byte) error {
	// dque keeps the object in its in-memory tail segment: it must own it.
	item := &dqueItem{Data: append([]byte(nil), payload...)}
	if err := d.q.Enqueue(item); err != nil {
		return err
	}
	d.ready.broadcast()
	return nil
}

func (d *dqueQueue) NewConsumer() (Consumer, error) { return dqueConsumer{d}, nil }

// dqueConsumer is a consuming goroutine's handle; closing it leaves the queue
// open.
type dqueConsumer struct{ d *dqueQueue }

func (c dqueConsumer) Close() error { return nil }

func (c dqueConsumer) Dequeue(ctx context.Context) (Delivery, error) {
	d := c.d
	for {
		woken := d.ready.wait()
		obj, err := d.q.Dequeue()
		if err == nil {
			return dqueDelivery{obj.(*dqueItem)}, nil
		}
		if !errors.Is(err, dque.ErrEmpty) {
			return nil, err
		}
		select {
		case <-woken:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Settle turns turbo mode's buffered writes into durable ones before the
// bytes on disk are measured.
func (d *dqueQueue) Settle(context.Context) error {
	if !d.q.Turbo() {
		return nil
	}
	return d.q.TurboSync()
}

func (d *dqueQueue) Close() error { return d.q.Close() }

type dqueDelivery struct{ item *dqueItem }

func (m dqueDelivery) Payload() []byte { return m.item.Data }
func (m dqueDelivery) Ack() error      { return nil } // dque has no acks
