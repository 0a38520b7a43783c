package fuzz_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/walq/walq/fuzz"
)

// TestDeadParentPurgeLate checks how TestKill9DeadExpiry's parent judges a
// delivery reported after a purge of its message returned: one whose
// lease ran out before the purge started (its consumer stalled before
// reporting it, the queue's expiry dead-lettered the message, the purge
// took it) is a late report; one made after the purge started is a
// redelivery after an ack, which the oracle counts.
func TestDeadParentPurgeLate(t *testing.T) {
	const lease = 40 * time.Millisecond
	purge := time.Date(2026, 12, 6, 22, 0, 0, 0, time.UTC).UnixNano()
	for _, c := range []struct {
		name string
		at   int64 // the delivery's time
		bad  bool  // a redelivery after the purge
	}{
		{"lease ran out before the purge", purge - int64(lease) - int64(time.Millisecond), false},
		{"lease ran out within the clocks' margin", purge - int64(lease) + int64(lateMargin), false},
		{"lease still running at the purge", purge - int64(lease) + int64(lateMargin) + 1, true},
		{"delivered after the purge started", purge + int64(time.Millisecond), true},
	} {
		h := &deadParent{t: t, expiry: true, lease: lease, oa: fuzz.NewOracle(), ow: fuzz.NewOracle(),
			lastDelivery: make(map[string]int), lastAt: make(map[string]int64), purgeAt: make(map[string]int64),
			fate: make(map[string]byte)}
		tok := "A1.0.0-10"
		first := purge - 5*int64(lease)
		for _, l := range []string{
			"a " + tok, "e " + tok,
			fmt.Sprintf("d %s 1 %d", tok, first),
			fmt.Sprintf("L %s 1 %d", tok, first), // its lease ran out: ready again
			fmt.Sprintf("u %s %d", tok, purge), "U " + tok,
			fmt.Sprintf("d %s 2 %d", tok, c.at),
		} {
			h.apply(l)
		}
		r := h.oa.Result()
		if got := r.RedeliveredAfterAck > 0; got != c.bad || len(h.violations) > 0 {
			t.Errorf("%s: redelivered-after-ack=%d (want a violation: %v), violations %q; %s", c.name, r.RedeliveredAfterAck, c.bad, h.violations, r)
		}
		if late := h.late == 1; late == c.bad {
			t.Errorf("%s: late reports %d, want %d", c.name, h.late, map[bool]int{true: 0, false: 1}[c.bad])
		}
	}
}
