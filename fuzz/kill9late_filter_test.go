package fuzz_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/walq/walq/fuzz"
)

// TestKill9LateFilter feeds the kill -9 loop's parent the reports of a
// message delivered twice, the second delivery acked before the first
// one's line arrives, and checks that the first is taken for a stalled
// consumer's late report only when its lease ran out no later than the
// acked delivery began: a delivery that began less than AckTimeout before
// the acked one, or after it, overlapped its lease and must reach the
// oracle as a redelivery after the ack.
func TestKill9LateFilter(t *testing.T) {
	const lease = 100 * time.Millisecond
	const acked = int64(1_000_000_000_000) // the acked delivery's start, unix ns
	cases := []struct {
		name  string
		began int64 // the late-reported delivery's start
		late  bool  // taken for a late report, not fed to the oracle
	}{
		{"ran out long before", acked - int64(time.Second), true},
		{"ran out as the acked one began", acked - int64(lease), true},
		{"one nanosecond of lease left", acked - int64(lease) + 1, false},
		{"began with the acked one", acked, false},
		{"began after the acked one", acked + 1, false},
		{"no start reported", 0, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := &kill9Parent{t: t, opts: kill9Options{AckTimeout: lease}, oa: fuzz.NewOracle()}
			h.newCycle()
			tag := fmt.Sprintf("A1.0.0@%d", acked)
			for _, l := range []string{"a A1.0.0", "e A1.0.0",
				"d " + withDeliveryTimes([]string{tag}, time.Unix(0, acked+1000))[0], "k " + tag, "K " + tag,
				fmt.Sprintf("d A1.0.0@%d %d %d", c.began, acked+3000, acked+4000)} {
				h.apply(l)
			}
			r := h.oa.Result()
			if c.late && (h.late != 1 || !r.OK()) {
				t.Errorf("a delivery whose lease ran out %v before the acked one began: late=%d, oracle %s; want it counted late and kept from the oracle",
					time.Duration(acked-c.began)-lease, h.late, r)
			}
			if !c.late && (h.late != 0 || r.RedeliveredAfterAck != 1) {
				t.Errorf("a delivery begun %v before the acked one, with a lease of %v: late=%d, oracle %s; want one redelivery after the ack",
					time.Duration(acked-c.began), lease, h.late, r)
			}
		})
	}
}
