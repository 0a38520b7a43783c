// Package prom exposes a walq queue's metrics to Prometheus. It is its own
// module, so that the walq module does not depend on the Prometheus
// client.
//
//	reg.MustRegister(prom.NewCollector(q, prometheus.Labels{"queue": "orders"}))
//
// Every scrape calls Metrics once. The names follow Prometheus
// conventions: counters end in _total, durations are in seconds and sizes
// in bytes:
//
//	walq_messages_enqueued_total, _delivered_total, _redelivered_total,
//	_acked_total, _nacked_total, _dead_lettered_total, _moved_total
//	walq_leases_expired_total
//	walq_sorted_values_published_total, walq_sorted_batches_pulled_total,
//	walq_sorted_batches_acked_total
//	walq_messages{state="ready|delayed|in_flight|dead"}
//	walq_sorted_values{state="pending|leased|dead"}
//	walq_oldest_message_age_seconds, walq_log_bytes, walq_live_bytes
//	walq_fsync_duration_seconds, walq_fsync_records (histograms)
//	walq_enqueue_to_ack_seconds (histogram)
//	walq_background_errors_total
//	walq_counts_unread, walq_oldest_message_unread
//
// walq_counts_unread is 1 while the queue's log is poisoned (a failed
// write or fsync) and could not be read back (queue.Stats.CountsErr, which
// says why; the queue logs it too): the other figures are then the calls',
// an enqueue whose write failed included, not what a reopen finds. Alert
// on it (walq_counts_unread == 1), and mark the counts of a dashboard
// with it.
//
// walq_oldest_message_unread is 1 while the enqueue record of the oldest
// never-delivered message cannot be read from the log (queue.Stats.OldestErr
// says why: damage, wrapping queue.ErrCorrupt, which its delivery meets
// too, or an I/O error): walq_oldest_message_age_seconds then leaves that
// message out, and reads 0 when no other message is live. A backlog alert
// on the age alone misses such a queue: alert on this gauge too.
package prom
