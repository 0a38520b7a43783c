package fuzz_test

import (
	"testing"
	"time"
)

// kill9Compacting are TestKill9Compacting's: the smallest segments,
// a snapshot wanted after every append (the housekeeper compacts back to
// back and cuts the log while the producers' and consumers' calls,
// asynchronous ones included, are in flight; the consumers keep the
// backlog short, so a compaction seldom copies messages forward, which
// move_crash_test.go pins), producer ids remembered past their ack,
// a second delivery that is the last (a crash that ends a lease counts
// one), 100 ms leases that run out while most children live (maxRun), and
// a sorted queue whose keys are pulled side by side.
var kill9Compacting = kill9Options{SegmentSize: 4096, SnapshotBytes: 1,
	AckTimeout: 100 * time.Millisecond, DedupWindow: time.Second, MaxDeliveries: 2, ManyFlights: true}

// TestKill9Compacting is TestKill9 with kill9Compacting's options, which
// its own options never reach: compactions run back to back, so a SIGKILL,
// or a death at a snapshot step, often lands inside one.
//
// Short run: 30 cycles (fewer under -race). Long run:
//
//	WALQ_CRASH_CYCLES=1000 go test ./fuzz -run '^TestKill9Compacting$' -timeout 2h -v
func TestKill9Compacting(t *testing.T) {
	runKill9(t, kill9Compacting, envInt(t, "WALQ_CRASH_CYCLES", scaled(30, 3)))
}
