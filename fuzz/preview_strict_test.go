package fuzz_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/walq/walq/queue"
)

// A read-only salvaging open (the preview) ends a crashed process's leases
// in memory as the salvage does: TestSalvagePreviewMatchesTheSalvage without
// folding in-flight into ready, with Expired and Deliveries shown, and
// with MaxDeliveries set so that some crashed leases end in the dead set.
func TestSalvagePreviewEndsLeasesAsTheSalvage(t *testing.T) {
	seeds := envInt(t, "WALQ_PREVIEW_SEEDS", 100)
	hs := damagedHistories(t, 1, seeds)
	for _, maxDel := range []int{-1, 2} {
		compared, deadOpen := 0, 0
		for _, h := range hs {
			if h.img == nil {
				continue
			}
			o := drainOptions()
			o.MaxDeliveries = maxDel
			qr, qw, rerr, werr := openBoth(t, h.img, o)
			if rerr == nil && werr == nil {
				compared++
				if qw.Recovery().DeadOnOpen > 0 {
					deadOpen++
				}
				if got, want := strictView(t, qr), strictView(t, qw); got != want {
					t.Errorf("max %d seed %d, damage %v:\npreview:\n%s\nsalvage:\n%s", maxDel, h.seed, h.what, got, want)
				}
			}
			if qr != nil {
				qr.Close()
			}
			if qw != nil {
				qw.Close()
			}
		}
		t.Logf("max %d: compared %d of %d, %d with a lease ended dead", maxDel, compared, seeds, deadOpen)
	}
}

func strictView(t *testing.T, q *queue.Queue) string {
	t.Helper()
	s := q.Stats()
	head := fmt.Sprintf("ready %d delayed %d inflight %d dead %d acked %d deadlettered %d expired %d",
		s.Ready, s.Delayed, s.InFlight, s.Dead, s.Acked, s.DeadLettered, s.Expired)
	dl, err := q.DeadLetters(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dl {
		head += " " + tokenOf(d.Payload) + ":" + d.Reason + fmt.Sprintf("/%d", d.Deliveries)
	}
	rec := q.Recovery()
	head += fmt.Sprintf(" requeued %d deadonopen %d dropped %v", rec.Requeued, rec.DeadOnOpen, rec.Dropped)
	var lines []string
	for st := queue.StateReady; st <= queue.StateDead; st++ {
		ms, err := q.Browse(st, 0, 10000)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			full, err := q.Peek(m.Seq)
			if err != nil {
				t.Fatalf("peek %d: %v", m.Seq, err)
			}
			lines = append(lines, fmt.Sprintf("seq=%04d %v id=%s reason=%q deliveries=%d due=%d payload=%s/%d", m.Seq, st, m.ID,
				m.Reason, m.Deliveries, m.Due.UnixNano(), tokenOf(full.Payload), len(full.Payload)))
		}
	}
	slices.Sort(lines)
	return head + "\n" + strings.Join(lines, "\n")
}
