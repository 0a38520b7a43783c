package wal

import (
	"time"

	"github.com/walq/walq/internal/metric"
)

// Histogram is a histogram's figures: fixed power-of-two bucket bounds,
// per-bucket counts, the count and the sum of the values observed.
type Histogram = metric.Snapshot

// SyncMetrics is what the log's fsyncs of the tail segment took.
type SyncMetrics struct {
	Latency Histogram // seconds per fsync
	Records Histogram // records each fsync made durable
}

// syncMetrics records every fsync the syncer runs. Its zero value is ready;
// it is written with atomic adds only, so observing costs no lock.
type syncMetrics struct {
	latency metric.Histogram // microsecond buckets, nanosecond sum
	records metric.Histogram // records per fsync
}

// observeSync records one fsync that took took and made records records
// durable. The syncer calls it after each fsync of the tail segment.
func (m *syncMetrics) observeSync(took time.Duration, records int) {
	ns := uint64(max(took, 0))
	m.latency.Observe(metric.Units(ns, 1000), ns)
	m.records.Observe(uint64(max(records, 0)), uint64(max(records, 0)))
}

// SyncMetrics returns the fsync latency and records-per-fsync histograms
// since Open. It is cheap (a few hundred atomic loads) and safe to call at
// any time, also after Close.
func (l *Log) SyncMetrics() SyncMetrics {
	return SyncMetrics{
		Latency: l.metrics.latency.Snapshot(1e-6, 1e-9),
		Records: l.metrics.records.Snapshot(1, 1),
	}
}
