package fuzz_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/walq/walq/fuzz"
)

// The oracle follows a message, not a delivery: two deliveries of one
// message whose leases overlap, both reported before either is acked, look
// to it like a delivery and its redelivery. The kill -9 loop checks them
// apart, by their starts.
//
// A consumer of a kill -9 child that writes an ack attempt ('k') for a
// delivery settles it in no other way: it acks it, after an Extend at
// most. An Extend sets the deadline to its own reading plus its length,
// which may be sooner than AckTimeout after the start (the child extends
// by 300 ms, TestKill9's leases are 400 ms), so a delivery whose consumer
// wrote an extend attempt ('E') is not judged. Any other one's lease ends
// by that ack,
// after which no delivery of the message may begin, or by its deadline,
// its start plus AckTimeout or later (see kill9late_test.go for why the
// next delivery begins no earlier). So while a delivery whose consumer
// tried to ack it runs, from its start to AckTimeout after it, no other
// delivery of the message begins. A delivery that was nacked or
// dead-lettered ends earlier, and its consumer's 'R' line may come after
// the next delivery's lines or never (a kill), so only acked deliveries
// are judged.

// deliveryStarts are one cycle's starts (unix ns, the child's queue
// clock) of the ack-queue deliveries of one message.
type deliveryStarts struct {
	all    []int64 // every delivery reported ('d' lines, late ones too)
	acking []int64 // those whose consumer tried to ack them ('k' lines), not to extend them
	extend []int64 // those whose consumer tried to extend them ('E' lines)
}

// nextStart returns the earliest start in others after at, and whether
// there is one.
func nextStart(at int64, others []int64) (int64, bool) {
	next, ok := int64(0), false
	for _, o := range others {
		if o > at && (!ok || o < next) {
			next, ok = o, true
		}
	}
	return next, ok
}

// noteDelivery records a delivery of tok begun at at, and judges it
// against the leases of the deliveries whose consumer tried to ack them.
func (h *kill9Parent) noteDelivery(tok string, at int64) {
	if at == 0 || h.opts.AckTimeout <= 0 {
		return
	}
	s := h.starts[tok]
	for _, e := range s.acking {
		if at > e {
			h.judge(tok, e, at)
		}
	}
	s.all = append(s.all, at)
	h.starts[tok] = s
}

// noteAckAttempt records that the consumer of the delivery of tok begun
// at at tried to ack it, and judges against its lease the next delivery
// of tok reported so far.
func (h *kill9Parent) noteAckAttempt(tok string, at int64) {
	if at == 0 || h.opts.AckTimeout <= 0 {
		return
	}
	s := h.starts[tok]
	if slices.Contains(s.extend, at) {
		return
	}
	if next, ok := nextStart(at, s.all); ok {
		h.judge(tok, at, next)
	}
	s.acking = append(s.acking, at)
	h.starts[tok] = s
}

// noteExtend records that the consumer of the delivery of tok begun at at
// tried to extend its lease: its deadline may have moved sooner.
func (h *kill9Parent) noteExtend(tok string, at int64) {
	s := h.starts[tok]
	s.extend = append(s.extend, at)
	h.starts[tok] = s
}

// judge checks a delivery of tok begun at next against the lease of a
// delivery begun at at, whose consumer tried to ack it: next must not
// begin before that lease's deadline, AckTimeout after at.
func (h *kill9Parent) judge(tok string, at, next int64) {
	gap := time.Duration(next - at)
	if h.judged == 0 || gap < h.closest {
		h.closest = gap
	}
	h.judged++
	if gap < h.opts.AckTimeout {
		h.overlap(tok, at, next)
	}
}

// overlap records the violation: a delivery of tok began at next, inside
// the lease of an acked delivery begun at at.
func (h *kill9Parent) overlap(tok string, at, next int64) {
	h.overlaps = append(h.overlaps, fmt.Sprintf("%s: a delivery began %v after one whose consumer tried to ack it, inside its lease of %v; report codes %q",
		tok, time.Duration(next-at), h.opts.AckTimeout, h.hist[tok]))
}

// TestKill9LeaseOverlap feeds the kill -9 loop's parent the reports of two
// deliveries of one message and checks that it fails the cycle exactly
// when the second began inside the lease of a first one whose consumer
// tried to ack it, whichever of their lines comes first.
func TestKill9LeaseOverlap(t *testing.T) {
	const lease = 100 * time.Millisecond
	const first = int64(1_000_000_000_000) // the first delivery's start, unix ns
	d := func(at int64) string {
		return "d " + withDeliveryTimes([]string{fmt.Sprintf("A1.0.0@%d", at)}, time.Unix(0, at))[0]
	}
	tag := func(code string, at int64) string { return fmt.Sprintf("%s A1.0.0@%d", code, at) }
	inside, atDeadline := first+int64(lease)-1, first+int64(lease)
	cases := []struct {
		name    string
		lines   []string
		overlap bool
	}{
		{"second reported before the first's ack attempt", []string{d(first), d(inside), tag("k", first)}, true},
		{"second reported after the first's ack attempt", []string{d(first), tag("k", first), d(inside)}, true},
		{"second acked before the first's ack attempt", []string{d(first), d(first + 1), tag("k", first+1), tag("K", first+1), tag("k", first)}, true},
		{"second began at the first's deadline", []string{d(first), tag("k", first), tag("x", first), d(atDeadline), tag("k", atDeadline)}, false},
		{"first extended to less than AckTimeout", []string{d(first), tag("E", first), tag("k", first), tag("x", first), d(inside), tag("k", inside)}, false},
		{"second extended, first not", []string{d(first), d(inside), tag("E", inside), tag("k", inside), tag("k", first)}, true},
		{"first nacked", []string{d(first), d(first + 1), tag("k", first+1), tag("R", first)}, false},
		{"first late, after the second's ack", []string{d(atDeadline), tag("k", atDeadline), tag("K", atDeadline), d(first), tag("k", first), tag("x", first)}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := &kill9Parent{t: t, opts: kill9Options{AckTimeout: lease}, oa: fuzz.NewOracle()}
			h.newCycle()
			for _, l := range append([]string{"a A1.0.0", "e A1.0.0"}, c.lines...) {
				h.apply(l)
			}
			if got := len(h.overlaps) > 0; got != c.overlap {
				t.Errorf("lines %q: overlap found %v (%q), want %v", c.lines, got, h.overlaps, c.overlap)
			}
		})
	}
}
