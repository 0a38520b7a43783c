package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
)

// bboltBucket holds the queue: key = 8-byte big-endian sequence number from
// the bucket's NextSequence, so a cursor's First is the oldest message.
var bboltBucket = []byte("queue")

// bboltBatchDelay is db.MaxBatchDelay for the batch variant. A commit costs
// one fdatasync (≈ 0.2–1 ms here); waiting about as long lets the callers
// that arrive during a commit join the next one. The default, 10 ms, is
// tuned for many more callers than a queue usually has.
const bboltBatchDelay = 500 * time.Microsecond

// bboltVariant is one configuration of the bbolt FIFO.
type bboltVariant struct {
	mode   string
	batch  bool // transactions through db.Batch
	noSync bool // Options.NoSync: no fsync at commit
	// tuned sets NoFreelistSync and FreelistMapType, the settings etcd runs
	// bbolt with: faster commits, but the freelist is rebuilt by scanning
	// the file on open.
	tuned bool
}

func bboltSystems() []System {
	mk := func(v bboltVariant, bulk bool, only []string) System {
		return System{
			Name: "bbolt/" + v.mode, Family: "bbolt", Mode: v.mode, Kind: KindQueue,
			Durable: !v.noSync, Bulk: bulk, FIFO: true, Workloads: only, Reader: "bbolt/nosync",
			Config: func(h Hint) string { return bboltConfig(v, h) },
			Open:   func(dir string, h Hint) (Queue, error) { return openBbolt(dir, v, h) },
		}
	}
	return []System{
		mk(bboltVariant{mode: "update"}, false, nil),
		mk(bboltVariant{mode: "batch", batch: true}, true, nil),
		mk(bboltVariant{mode: "nosync", batch: true, noSync: true}, false, nil),
		// The tuned variant changes what an open costs: it runs where opens
		// are timed after a clean close and after a kill.
		mk(bboltVariant{mode: "tuned", batch: true, tuned: true}, true, []string{wRecovery, wCrash}),
	}
}

func bboltConfig(v bboltVariant, h Hint) string {
	s := "one fsync per tx; freelist synced, array type (bbolt's defaults)"
	if v.tuned {
		s = "one fsync per tx; NoFreelistSync+FreelistMapType (etcd's settings: faster commits, freelist rebuilt on open)"
	}
	s += "; enqueue = Put(NextSequence); dequeue = First+Delete in one tx, no ack (at-most-once)"
	if v.noSync {
		s = "NoSync (no fsync); " + strings.TrimPrefix(s, "one fsync per tx; ")
	}
	if !v.batch {
		return "db.Update per op; " + s
	}
	return fmt.Sprintf("db.Batch per op, MaxBatchSize=%d (producers+consumers), MaxBatchDelay=%v; %s",
		batchCallers(h), bboltBatchDelay, s)
}

// batchCallers is the number of goroutines that call db.Batch at once.
func batchCallers(h Hint) int {
	return max(1, h.Producers+h.Consumers)
}

// bboltQueue is a FIFO on one bbolt bucket.
type bboltQueue struct {
	db    *bolt.DB
	batch bool    // run transactions through db.Batch
	ready *wakeup // broadcast after every enqueue commits
}

func openBbolt(dir string, v bboltVariant, h Hint) (*bboltQueue, error) {
	opts := &bolt.Options{Timeout: time.Second, NoSync: v.noSync}
	if v.tuned {
		opts.NoFreelistSync, opts.FreelistType = true, bolt.FreelistMapType
	}
	db, err := bolt.Open(filepath.Join(dir, "queue.db"), 0o600, opts)
	if err != nil {
		return nil, fmt.Errorf("bbolt: open %s: %w", dir, err)
	}
	db.MaxBatchSize = batchCallers(h)
	db.MaxBatchDelay = bboltBatchDelay
	err = db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(bboltBucket)
		return err
	})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("bbolt: create bucket: %w", err), db.Close())
	}
	return &bboltQueue{db: db, batch: v.batch, ready: newWakeup()}, nil
}

func (b *bboltQueue) tx(fn func(*bolt.Tx) error) error {
	if b.batch {
		return b.db.Batch(fn)
	}
	return b.db.Update(fn)
}

func (b *bboltQueue) Enqueue(_ context.Context, payload []byte) error {
	err := b.tx(func(tx *bolt.Tx) error {
		bk := tx.Bucket(bboltBucket)
		seq, err := bk.NextSequence()
		if err != nil {
			return err
		}
		return bk.Put(binary.BigEndian.AppendUint64(nil, seq), payload)
	})
	if err != nil {
		return err
	}
	b.ready.broadcast()
	return nil
}

// pop removes and returns the oldest message, or nil when the bucket is
// empty. Under db.Batch the function may run more than once; it sets its
// result afresh every time.
func (b *bboltQueue) pop() ([]byte, error) {
	var out []byte
	err := b.tx(func(tx *bolt.Tx) error {
		out = nil
		c := tx.Bucket(bboltBucket).Cursor()
		k, v := c.First()
		if k == nil {
			return nil
		}
		out = append([]byte(nil), v...)
		return c.Delete()
	})
	return out, err
}

func (b *bboltQueue) NewConsumer() (Consumer, error) { return bboltConsumer{b}, nil }

// Scan reads the bucket in key order in one read transaction.
func (b *bboltQueue) Scan(fn func([]byte) error) error {
	return b.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bboltBucket).ForEach(func(_, v []byte) error { return fn(v) })
	})
}

func (b *bboltQueue) Close() error { return b.db.Close() }

// bboltConsumer is a consuming goroutine's handle.
type bboltConsumer struct{ b *bboltQueue }

func (c bboltConsumer) Dequeue(ctx context.Context) (Delivery, error) {
	for {
		woken := c.b.ready.wait()
		p, err := c.b.pop()
		if err != nil {
			return nil, err
		}
		if p != nil {
			return plainDelivery(p), nil
		}
		select {
		case <-woken:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (c bboltConsumer) Close() error { return nil }

// plainDelivery is a message from a system without acks.
type plainDelivery []byte

func (p plainDelivery) Payload() []byte { return p }
func (p plainDelivery) Ack() error      { return nil }
