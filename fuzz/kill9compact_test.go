package fuzz_test

import (
	"testing"
	"time"
)

// kill9Options are the options the kill -9 children open their queues
// with.
type kill9Options struct {
	SegmentSize   int64
	SnapshotBytes int64
	AckTimeout    time.Duration
	DedupWindow   time.Duration
	MaxDeliveries int  // the ack queue's (the sorted queue has none)
	ManyFlights   bool // the sorted queue without SingleFlight
}

// kill9Defaults are TestKill9's: segments small enough to roll, a
// snapshot every 128 KiB, leases that run out within a child's life.
var kill9Defaults = kill9Options{SegmentSize: 32 << 10, SnapshotBytes: 128 << 10,
	AckTimeout: 400 * time.Millisecond, MaxDeliveries: 4}

// kill9Compacting are TestKill9Compacting's: the smallest segments,
// a snapshot wanted after every append (the housekeeper compacts back to
// back, cutting the log and copying messages forward while the producers'
// and consumers' calls, asynchronous ones included, are in flight),
// producer ids remembered past their ack, a second delivery that is the
// last (a crash that ends a lease counts one), leases that run out between
// most calls, and a sorted queue whose keys are pulled side by side.
var kill9Compacting = kill9Options{SegmentSize: 4096, SnapshotBytes: 1,
	AckTimeout: 100 * time.Millisecond, DedupWindow: time.Second, MaxDeliveries: 2, ManyFlights: true}

// TestKill9Compacting is TestKill9 with kill9Compacting's options, which
// its own options never reach: a SIGKILL, or a death at a snapshot step,
// lands inside a compaction nearly every time.
//
// Short run: 30 cycles (fewer under -race). Long run:
//
//	WALQ_CRASH_CYCLES=1000 go test ./fuzz -run '^TestKill9Compacting$' -timeout 2h -v
func TestKill9Compacting(t *testing.T) {
	runKill9(t, "TestKill9Compacting", kill9Compacting, envInt(t, "WALQ_CRASH_CYCLES", scaled(30, 3)))
}
