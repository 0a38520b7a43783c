package prom

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/walq/walq/queue"
)

// Source is a queue whose metrics the collector reads; *queue.Queue,
// *queue.Sorted and *queue.Windowed are sources.
type Source interface {
	Metrics() queue.Metrics
}

// Collector is a prometheus.Collector of one queue's metrics.
type Collector struct {
	src   Source
	descs descs
}

// descs are the metric descriptions, made once.
type descs struct {
	counters   []counter
	messages   *prometheus.Desc
	sorted     *prometheus.Desc
	oldest     *prometheus.Desc
	logBytes   *prometheus.Desc
	liveBytes  *prometheus.Desc
	fsync      *prometheus.Desc
	fsyncRecs  *prometheus.Desc
	enqueueAck *prometheus.Desc
	unread     *prometheus.Desc
	oldestErr  *prometheus.Desc
}

// counter is one lifetime total of queue.Metrics.
type counter struct {
	desc  *prometheus.Desc
	value func(m *queue.Metrics) uint64
}

// NewCollector returns a collector of src's metrics; labels (such as the
// queue's name) are added to every metric and may be nil.
func NewCollector(src Source, labels prometheus.Labels) *Collector {
	d := func(name, help string, variable ...string) *prometheus.Desc {
		return prometheus.NewDesc("walq_"+name, help, variable, labels)
	}
	c := func(name, help string, v func(m *queue.Metrics) uint64) counter {
		return counter{d(name, help), v}
	}
	return &Collector{src: src, descs: descs{
		counters: []counter{
			c("messages_enqueued_total", "Messages enqueued.", func(m *queue.Metrics) uint64 { return m.Enqueued }),
			c("messages_delivered_total", "Deliveries (leases), redeliveries included.", func(m *queue.Metrics) uint64 { return m.Delivered }),
			c("messages_redelivered_total", "Deliveries of a message delivered before, since the queue was opened.", func(m *queue.Metrics) uint64 { return m.Redelivered }),
			c("messages_acked_total", "Messages acked.", func(m *queue.Metrics) uint64 { return m.Acked }),
			c("messages_nacked_total", "Deliveries nacked.", func(m *queue.Metrics) uint64 { return m.Nacked }),
			c("leases_expired_total", "Leases that ran out.", func(m *queue.Metrics) uint64 { return m.Expired }),
			c("messages_dead_lettered_total", "Messages moved to the dead-letter set.", func(m *queue.Metrics) uint64 { return m.DeadLettered }),
			c("messages_moved_total", "Messages copied forward by compaction.", func(m *queue.Metrics) uint64 { return m.Moved }),
			c("sorted_values_published_total", "Sorted queues: values published.", func(m *queue.Metrics) uint64 { return m.Published }),
			c("sorted_batches_pulled_total", "Sorted queues: batches pulled.", func(m *queue.Metrics) uint64 { return m.Pulled }),
			c("sorted_batches_acked_total", "Sorted queues: batches acked.", func(m *queue.Metrics) uint64 { return m.BatchesAcked }),
			c("background_errors_total", "Failures of background work (requeue, snapshot, compaction) since the queue was opened.", func(m *queue.Metrics) uint64 { return m.BackgroundErrors }),
		},
		messages:   d("messages", "Messages by state.", "state"),
		sorted:     d("sorted_values", "Sorted queues: values by state.", "state"),
		oldest:     d("oldest_message_age_seconds", "Age of the oldest live, not dead, message (of a sorted queue, pending or leased value)."),
		logBytes:   d("log_bytes", "Bytes of all log segments."),
		liveBytes:  d("live_bytes", "Log bytes the live messages need."),
		fsync:      d("fsync_duration_seconds", "Time of each fsync of the log's tail segment."),
		fsyncRecs:  d("fsync_records", "Records each fsync of the log made durable."),
		enqueueAck: d("enqueue_to_ack_seconds", "Time from enqueue to the ack that settled the message."),
		unread: d("counts_unread", "1 when the log is poisoned and could not be read back: the counts and totals are "+
			"then the calls', failed ones included, not the log's (Stats.CountsErr)."),
		oldestErr: d("oldest_message_unread", "1 when the record of the oldest never-delivered message could not be read: "+
			"walq_oldest_message_age_seconds then leaves that message out (Stats.OldestErr)."),
	}}
}

// Describe sends every metric's description.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, k := range c.descs.counters {
		ch <- k.desc
	}
	for _, d := range []*prometheus.Desc{c.descs.messages, c.descs.sorted, c.descs.oldest, c.descs.logBytes,
		c.descs.liveBytes, c.descs.fsync, c.descs.fsyncRecs, c.descs.enqueueAck, c.descs.unread, c.descs.oldestErr} {
		ch <- d
	}
}

// Collect reads the queue's metrics once and sends them.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	m := c.src.Metrics()
	d := &c.descs
	for _, k := range d.counters {
		ch <- prometheus.MustNewConstMetric(k.desc, prometheus.CounterValue, float64(k.value(&m)))
	}
	gauge := func(desc *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, v, labels...)
	}
	gauge(d.messages, float64(m.Ready), "ready")
	gauge(d.messages, float64(m.Delayed), "delayed")
	gauge(d.messages, float64(m.InFlight), "in_flight")
	gauge(d.messages, float64(m.Dead), "dead")
	gauge(d.sorted, float64(m.SortedPending), "pending")
	gauge(d.sorted, float64(m.SortedLeased), "leased")
	gauge(d.sorted, float64(m.SortedDead), "dead")
	gauge(d.oldest, m.OldestAge.Seconds())
	gauge(d.logBytes, float64(m.LogBytes))
	gauge(d.liveBytes, float64(m.LiveBytes))
	gauge(d.unread, unread(m.CountsErr))
	gauge(d.oldestErr, unread(m.OldestErr))
	ch <- histogram(d.fsync, m.FsyncSeconds)
	ch <- histogram(d.fsyncRecs, m.RecordsPerFsync)
	ch <- histogram(d.enqueueAck, m.EnqueueToAckSeconds)
}

// histogram converts a walq histogram (per-bucket counts) to a Prometheus
// one (cumulative counts by upper bound).
func histogram(desc *prometheus.Desc, h queue.Histogram) prometheus.Metric {
	buckets := make(map[float64]uint64, len(h.Bounds))
	var cum uint64
	for i, bound := range h.Bounds {
		cum += h.Counts[i]
		buckets[bound] = cum
	}
	return prometheus.MustNewConstHistogram(desc, h.Count, h.Sum, buckets)
}

// unread is walq_counts_unread and walq_oldest_message_unread: 1 when
// what they mark could not be read (err: Metrics.CountsErr,
// Metrics.OldestErr), else 0.
func unread(err error) float64 {
	if err != nil {
		return 1
	}
	return 0
}
