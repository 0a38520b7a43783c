package wal

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestSyncMetricsRecordsObservations(t *testing.T) {
	l := &Log{}
	l.metrics.observeSync(1500*time.Microsecond, 7)
	l.metrics.observeSync(3*time.Millisecond, 1)
	m := l.SyncMetrics()
	assert.Equal(t, uint64(2), m.Latency.Count)
	assert.InDelta(t, 0.0045, m.Latency.Sum, 1e-12)
	assert.Equal(t, 8.0, m.Records.Sum)
	assert.InDelta(t, 2048e-6, m.Latency.Quantile(0.5), 1e-12, "1.5 ms is in the bucket up to 2.048 ms")
	assert.Equal(t, 8.0, m.Records.Quantile(1), "7 records are in the bucket up to 8")

	l = &Log{}
	l.metrics.observeSync(1024*time.Microsecond+500*time.Nanosecond, 1)
	assert.InDelta(t, 2048e-6, l.SyncMetrics().Latency.Quantile(1), 1e-12,
		"1.0245 ms is past the bucket up to 1.024 ms")
}
