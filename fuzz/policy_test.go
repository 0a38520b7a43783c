package fuzz_test

import (
	"fmt"
	"math"
	"time"

	"github.com/walq/walq/queue"
)

// policy is what an open may change from the open before: the options
// users change between deploys (MaxDeliveries, DedupWindow, AckTimeout,
// Sync), or the way walq's writing commands open a queue between two runs
// of the application (no delivery limit, an unlimited dedup window). The
// model fuzzers change it at a clean reopen or a crash-image reopen when
// the first header byte has policyFlag set; each such reopen then reads
// one more byte (readPolicy).
type policy struct {
	maxDeliver int            // Options.MaxDeliveries; no limit when <= 0
	dedup      time.Duration  // Options.DedupWindow
	ackTimeout time.Duration  // Options.AckTimeout
	sync       queue.SyncMode // Options.Sync
}

// policyFlag, in the first header byte, makes every reopen read a policy
// byte. Inputs without it (every input written before) run as they did:
// the bit leaves the byte's other choices as they were.
const policyFlag = 0x80

// ackTimeoutChoices: the fuzzers' first AckTimeout, shorter, longer.
var ackTimeoutChoices = []time.Duration{10 * time.Second, 2 * time.Second, 30 * time.Second}

// toolWindow is the dedup window of walq's writing commands: unlimited.
const toolWindow = time.Duration(math.MaxInt64)

// readPolicy returns the policy the byte b chooses: at or above 128 the
// walq tool's open (cur's AckTimeout and Sync); below, MaxDeliveries,
// DedupWindow, AckTimeout and Sync from their choices.
func readPolicy(b int, cur policy) policy {
	if b >= 128 {
		cur.maxDeliver, cur.dedup = -1, toolWindow
		return cur
	}
	return policy{maxDeliver: deliverChoices[b%5], dedup: dedupChoices[b/5%3],
		ackTimeout: ackTimeoutChoices[b/15%3], sync: syncChoices[b/45%3]}
}

func (p policy) String() string {
	w := p.dedup.String()
	if p.dedup == toolWindow {
		w = "unlimited"
	}
	return fmt.Sprintf("policy deliveries=%d dedup=%s ack-timeout=%v sync=%d", p.maxDeliver, w, p.ackTimeout, p.sync)
}
