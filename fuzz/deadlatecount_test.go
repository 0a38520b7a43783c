package fuzz_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/walq/walq/fuzz"
)

// TestDeadParentLateCount checks how TestKill9DeadExpiry's parent judges
// the count of a delivery reported late: one made before the last
// delivery reported in order has a smaller count, one made after it (its
// lease ran out before a purge) a larger one, and a count that breaks
// this is a violation; a delivery made before a requeue from the dead set
// may have started its count anew, and is not compared.
func TestDeadParentLateCount(t *testing.T) {
	const lease = 40 * time.Millisecond
	const tok = "A1.0.0-10"
	base := time.Date(2026, 12, 6, 22, 0, 0, 0, time.UTC).UnixNano()
	at := func(ms int) int64 { return base + int64(ms)*int64(time.Millisecond) }
	d := func(n, ms int) string { return fmt.Sprintf("d %s %d %d", tok, n, at(ms)) }
	for _, c := range []struct {
		name  string
		lines []string
		bad   bool // a count the parent must report
	}{
		{"made before the last one, smaller count", []string{d(2, 300), d(1, 100)}, false},
		{"made before the last one, same count", []string{d(2, 300), d(2, 100)}, true},
		{"made before the last one, larger count", []string{d(1, 300), d(2, 100)}, true},
		{"made before the last one, a requeue started before both",
			[]string{fmt.Sprintf("q %s %d", tok, at(50)), d(2, 300), d(2, 100)}, false},
		{"lease ran out before a purge, larger count",
			[]string{d(1, 100), fmt.Sprintf("u %s %d", tok, at(300)), "U " + tok, d(2, 200)}, false},
		{"lease ran out before a purge, same count",
			[]string{d(1, 100), fmt.Sprintf("u %s %d", tok, at(300)), "U " + tok, d(1, 200)}, true},
	} {
		h := &deadParent{t: t, expiry: true, lease: lease, oa: fuzz.NewOracle(), ow: fuzz.NewOracle(),
			lastDelivery: make(map[string]int), lastAt: make(map[string]int64), requeueAt: make(map[string]int64),
			purgeAt: make(map[string]int64), fate: make(map[string]byte)}
		for _, l := range append([]string{"a " + tok, "e " + tok}, c.lines...) {
			h.apply(l)
		}
		if h.late != 1 {
			t.Errorf("%s: late reports %d, want 1", c.name, h.late)
		}
		if got := len(h.violations) > 0; got != c.bad {
			t.Errorf("%s: violations %q, want a violation: %v", c.name, h.violations, c.bad)
		}
	}
}
