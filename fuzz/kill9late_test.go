package fuzz_test

import (
	"strconv"
	"strings"
	"time"
)

// A kill -9 child reports a delivery with a line written after
// DequeueBatch returned. A consumer that stalls between the lease and that
// line (inside DequeueBatch, which waits for the lease records to be
// written and reads the payloads, or after it) can let its lease run out;
// another consumer can then receive the message and ack it before the
// first line is written. That line comes after the ack but is no
// redelivery: its delivery ended before the acked one began.
//
// The queue proves how long before: a delivery's DeliveredAt is its lease
// record's At, the queue clock's reading under q.mu, and its deadline is
// that reading plus AckTimeout (leaseOneLocked in queue/dequeue.go). Its
// consumer had not settled it when it wrote the line (it settles after
// the line), so only its deadline ended it: the housekeeper ends a lease
// whose deadline is at or before its reading (index.Table.Expired), and
// the next delivery reads the clock after that, under q.mu again. An
// earlier reading ends nothing: an ack at or past the deadline is refused
// (state.leased) and the message stays leased until the housekeeper's
// reading passes it. So the delivery that was acked began at least
// AckTimeout after the late one; one that began less than that after it
// would have been leased while the late one's lease still ran, which is a
// fault the oracle must see.

// lateDelivery reports whether a delivery that began at at (unix ns, the
// queue's clock), reported after the ack of a delivery of the same
// message that began at acked, is such a late report: its lease of
// length lease ran out no later than the acked delivery began.
func lateDelivery(at, acked int64, lease time.Duration) bool {
	return at > 0 && lease > 0 && at <= acked-int64(lease)
}

// deliveryTimes are when a consumer of a kill -9 child got a delivery
// back from DequeueBatch and when it wrote its report line (unix ns, the
// wall clock), to tell where a late report stalled.
type deliveryTimes struct {
	returned, reported int64
}

// withDeliveryTimes returns the report arguments of the delivery tags
// toks ("tag returned reported"): DequeueBatch returned at ret, and the
// line is written now.
func withDeliveryTimes(toks []string, ret time.Time) []string {
	suffix := " " + strconv.FormatInt(ret.UnixNano(), 10) + " " + strconv.FormatInt(time.Now().UnixNano(), 10)
	out := make([]string, len(toks))
	for i, t := range toks {
		out[i] = t + suffix
	}
	return out
}

// splitDeliveryTimes splits a delivery report's argument into its
// delivery tag and its times (zero when the line has none).
func splitDeliveryTimes(arg string) (string, deliveryTimes) {
	tag, rest, ok := strings.Cut(arg, " ")
	if !ok {
		return arg, deliveryTimes{}
	}
	r, w, _ := strings.Cut(rest, " ")
	var d deliveryTimes
	d.returned, _ = strconv.ParseInt(r, 10, 64)
	d.reported, _ = strconv.ParseInt(w, 10, 64)
	return tag, d
}

// maxLateLogged bounds the late reports a run describes one by one.
const maxLateLogged = 20

// delivered feeds an ack-queue delivery of tok that began at at to the
// oracle, unless it is a late report (lateDelivery) of a delivery that
// ended before an acked one of the same message began; those are counted
// and described.
func (h *kill9Parent) delivered(tok string, at int64, times deliveryTimes) {
	acked, ok := h.ackedAt[tok]
	if !ok || !lateDelivery(at, acked, h.opts.AckTimeout) {
		h.oa.Delivered(tok)
		return
	}
	h.late++
	gap, stall := time.Duration(acked-at), time.Duration(times.reported-at)
	h.lateGaps, h.lateStalls = append(h.lateGaps, gap), append(h.lateStalls, stall)
	if h.late <= maxLateLogged {
		h.t.Logf("late delivery report of %s: began %v before the acked delivery (lease %v); DequeueBatch returned %v after it began, its line was written %v after it began; report codes %q",
			tok, gap, h.opts.AckTimeout, time.Duration(times.returned-at), stall, h.hist[tok])
	}
}
