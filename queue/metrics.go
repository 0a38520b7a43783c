package queue

import (
	"sync/atomic"
	"time"

	"github.com/walq/walq/internal/metric"
	"github.com/walq/walq/wal"
)

// Histogram is a histogram's figures: fixed power-of-two bucket bounds
// (Bounds, inclusive upper bounds), per-bucket counts (Counts, one more
// than Bounds: the last counts values past every bound), and the count
// and sum of the values observed.
type Histogram = wal.Histogram

// Metrics is what a monitoring system scrapes: lifetime counters, gauges
// and histograms. Counters and gauges are the figures of Stats; the
// histograms are recorded with atomic adds as the queue works, so a queue
// whose Metrics nobody reads pays only those adds.
type Metrics struct {
	// Counters: lifetime totals, kept across restarts (Redelivered: since Open).
	Enqueued     uint64 // messages enqueued
	Delivered    uint64 // deliveries (leases), redeliveries included
	Redelivered  uint64 // deliveries of a message delivered before, since Open
	Acked        uint64 // messages acked
	Nacked       uint64 // deliveries nacked
	Expired      uint64 // leases that ran out
	DeadLettered uint64 // messages moved to the dead-letter set
	Moved        uint64 // messages copied forward by compaction
	Published    uint64 // sorted queues: values published
	Pulled       uint64 // sorted queues: batches pulled
	BatchesAcked uint64 // sorted queues: batches acked

	// Gauges.
	Ready         int64         // deliverable now
	Delayed       int64         // waiting for their time
	InFlight      int64         // leased
	Dead          int64         // in the dead-letter set
	SortedPending int64         // sorted queues: values waiting to be pulled
	SortedLeased  int64         // sorted queues: values in leased batches
	SortedDead    int64         // sorted queues: values in the dead set
	OldestAge     time.Duration // age of the oldest live, not dead, message (sorted: pending or leased value); 0 when none
	LogBytes      int64         // bytes of all log segments
	LiveBytes     int64         // log bytes the live messages need

	// Histograms, since Open.
	FsyncSeconds        Histogram // time of each fsync of the log's tail segment
	RecordsPerFsync     Histogram // records each of those fsyncs made durable
	EnqueueToAckSeconds Histogram // from enqueue to the ack of the delivery that settled it

	BackgroundErrors uint64 // background failures since Open; see Stats.BackgroundErr

	// CountsErr is Stats.CountsErr: set when the log is poisoned and could
	// not be read back, so that the counters and gauges above are the
	// calls', not the log's.
	CountsErr error
	// OldestErr is Stats.OldestErr: set when the enqueue record of the
	// oldest never-delivered message could not be read, so that OldestAge
	// leaves that message out (0 when no other is live).
	OldestErr error
}

// Metrics returns the queue's counters, gauges and histograms. It costs
// what Stats costs, plus a few hundred atomic loads.
func (q *Queue) Metrics() Metrics {
	s := q.Stats()
	m := Metrics{
		Enqueued: s.Enqueued, Delivered: s.Delivered, Redelivered: q.obs.redelivered.Load(),
		Acked: s.Acked, Nacked: s.Nacked, Expired: s.Expired, DeadLettered: s.DeadLettered,
		Moved: s.Moved, Published: s.Published, Pulled: s.Pulled, BatchesAcked: s.BatchesAcked,
		Ready: s.Ready, Delayed: s.Delayed, InFlight: s.InFlight, Dead: s.Dead,
		SortedPending: int64(s.SortedPending), SortedLeased: int64(s.SortedLeased), SortedDead: int64(s.SortedDead),
		LogBytes: s.LogBytes, LiveBytes: s.LiveBytes, BackgroundErrors: s.BackgroundErrors, CountsErr: s.CountsErr,
		OldestErr: s.OldestErr,
	}
	if !s.OldestEnqueuedAt.IsZero() {
		m.OldestAge = max(0, s.At.Sub(s.OldestEnqueuedAt))
	}
	sm := q.log.SyncMetrics()
	m.FsyncSeconds, m.RecordsPerFsync = sm.Latency, sm.Records
	m.EnqueueToAckSeconds = q.obs.enqueueToAck.Snapshot(1e-3, 1e-9)
	return m
}

// Metrics returns the queue's counters, gauges and histograms.
func (s *Sorted[K]) Metrics() Metrics { return s.q.Metrics() }

// observer is what the queue records for Metrics, Stats and its log that
// the state does not hold. Every field is safe for concurrent use.
type observer struct {
	enqueueToAck   metric.Histogram // millisecond buckets, nanosecond sum
	redelivered    atomic.Uint64    // deliveries of messages delivered before
	writeErrLogged atomic.Bool      // the sticky write error was logged
	bg             background       // failing background jobs (events.go)
}

// observeAck records the enqueue-to-ack time of one message, ns
// nanoseconds (clamped at 0 if the clock went back).
func (o *observer) observeAck(ns int64) {
	v := uint64(max(ns, 0))
	o.enqueueToAck.Observe(metric.Units(v, 1e6), v)
}

// noteDelivery counts a delivery of a message that had deliveries before.
func (o *observer) noteDelivery(before uint32) {
	if before > 0 {
		o.redelivered.Add(1)
	}
}
