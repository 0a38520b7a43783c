package fuzz

import (
	"fmt"
	"sort"
	"strings"
)

// Oracle checks a queue against what its callers were told. Messages are
// named by tokens (the tests put a unique token in every payload). The
// caller reports each call as it starts and as it returns; at each recovery
// point it reports what a full drain of the recovered queue returned, and
// the Oracle counts:
//
//   - lost: an enqueue that returned success, not acked since, and not in
//     the drain;
//   - unexpected: a token in the drain (or delivered) that was never
//     enqueued, or whose enqueue an earlier recovery showed never happened;
//   - redelivered after ack: a token delivered again after an ack of it
//     returned success;
//   - drain duplicates: a token twice in one drain;
//   - duplicates: a token that came back after a crash ended its lease (or
//     an ack that had not returned). These are allowed: delivery is at
//     least once.
//
// What counts as "returned success" is the caller's business, and is how
// the same checker verifies every sync mode: after a kill -9 every call that
// returned counts (the page cache keeps what was written); after a
// simulated power loss under SyncInterval or SyncNever only calls whose
// records the log had fsynced count, and the others are fed as attempts.
//
// A call that started but did not return before the crash (an attempt)
// may or may not have taken effect; the next recovery decides, and from
// then on the Oracle holds the queue to that outcome.
type Oracle struct {
	msgs map[string]*msgState // every token seen
	open map[string]*msgState // the tokens not settled (acked, or shown absent): what a check scans
	res  Result               // running totals
}

// Result is what an Oracle counted. Pass means Lost, Unexpected,
// RedeliveredAfterAck and DrainDuplicates are all zero.
type Result struct {
	Checks              int // recovery points checked
	Enqueued            int // enqueues that returned success
	Acked               int // acks that returned success
	Drained             int // tokens seen in drains, over all checks
	Lost                int // acknowledged, not acked, missing from a drain
	Unexpected          int // delivered or drained but never enqueued
	RedeliveredAfterAck int // delivered or drained after a successful ack
	DrainDuplicates     int // a token twice in one drain
	Duplicates          int // came back after a crash cut its lease or ack (allowed)
	ResolvedPresent     int // attempts a recovery showed took effect
	ResolvedAbsent      int // attempts a recovery showed did not
	Examples            []string
}

// OK reports whether the queue kept its promises.
func (r Result) OK() bool {
	return r.Lost == 0 && r.Unexpected == 0 && r.RedeliveredAfterAck == 0 && r.DrainDuplicates == 0
}

// String is a one-line summary, with the first violations.
func (r Result) String() string {
	s := fmt.Sprintf("checks=%d enqueued=%d acked=%d drained=%d lost=%d unexpected=%d redelivered-after-ack=%d drain-duplicates=%d duplicates(allowed)=%d resolved=%d/%d",
		r.Checks, r.Enqueued, r.Acked, r.Drained, r.Lost, r.Unexpected, r.RedeliveredAfterAck,
		r.DrainDuplicates, r.Duplicates, r.ResolvedPresent, r.ResolvedAbsent)
	if len(r.Examples) > 0 {
		s += "; first violations: " + strings.Join(r.Examples, "; ")
	}
	return s
}

// Add returns the sum of two results (examples concatenated, capped).
func (r Result) Add(o Result) Result {
	r.Checks += o.Checks
	r.Enqueued += o.Enqueued
	r.Acked += o.Acked
	r.Drained += o.Drained
	r.Lost += o.Lost
	r.Unexpected += o.Unexpected
	r.RedeliveredAfterAck += o.RedeliveredAfterAck
	r.DrainDuplicates += o.DrainDuplicates
	r.Duplicates += o.Duplicates
	r.ResolvedPresent += o.ResolvedPresent
	r.ResolvedAbsent += o.ResolvedAbsent
	for _, e := range o.Examples {
		r.example("%s", e)
	}
	return r
}

// maxExamples bounds the violations a Result quotes.
const maxExamples = 8

func (r *Result) example(format string, args ...any) {
	if len(r.Examples) < maxExamples {
		r.Examples = append(r.Examples, fmt.Sprintf(format, args...))
	}
}

// enqState is what the Oracle knows about a message's enqueue.
type enqState uint8

const (
	enqAttempted enqState = iota + 1 // started; outcome unknown
	enqPresent                       // returned success, was delivered, or a drain showed it
	enqAbsent                        // a recovery showed the attempt did not take effect
)

// ackState is what the Oracle knows about a message's consumption.
type ackState uint8

const (
	ackNone      ackState = iota // not consumed
	ackAttempted                 // an ack started; outcome unknown
	ackDone                      // an ack returned success, or a drain showed the attempt took
)

// msgState is one token's history.
type msgState struct {
	enq    enqState
	ack    ackState
	leased bool // delivered, not yet released by an ack, nack or dead-letter
}

// NewOracle returns an Oracle that has seen nothing.
func NewOracle() *Oracle {
	return &Oracle{msgs: make(map[string]*msgState), open: make(map[string]*msgState)}
}

func (o *Oracle) get(tok string) *msgState {
	m := o.msgs[tok]
	if m == nil {
		m = &msgState{}
		o.msgs[tok] = m
		o.open[tok] = m
	}
	return m
}

// settle takes tok out of the set a check scans: it is acked or absent
// for good.
func (o *Oracle) settle(tok string, m *msgState) {
	m.leased = false
	delete(o.open, tok)
}

// EnqueueAttempt records that an enqueue of tok started.
func (o *Oracle) EnqueueAttempt(tok string) {
	m := o.get(tok)
	if m.enq == 0 {
		m.enq = enqAttempted
	}
}

// Enqueued records that an enqueue of tok returned success.
func (o *Oracle) Enqueued(tok string) {
	m := o.get(tok)
	if m.enq == enqAbsent {
		o.res.Unexpected++
		o.res.example("%s: enqueue acknowledged after a recovery showed it absent", tok)
		o.open[tok] = m
	}
	m.enq = enqPresent
	o.res.Enqueued++
}

// Delivered records that a consumer received tok. A delivery proves the
// enqueue is in the log.
func (o *Oracle) Delivered(tok string) {
	m, ok := o.msgs[tok]
	switch {
	case !ok || m.enq == enqAbsent:
		o.res.Unexpected++
		o.res.example("%s: delivered but never enqueued", tok)
		m = o.get(tok)
		o.open[tok] = m
	case m.ack == ackDone:
		o.res.RedeliveredAfterAck++
		o.res.example("%s: delivered after its ack returned", tok)
	}
	m.enq = enqPresent
	m.leased = m.ack != ackDone
}

// AckAttempt records that an ack of tok started.
func (o *Oracle) AckAttempt(tok string) {
	if m := o.get(tok); m.ack == ackNone {
		m.ack = ackAttempted
	}
}

// Acked records that an ack of tok returned success.
func (o *Oracle) Acked(tok string) {
	m := o.get(tok)
	m.ack = ackDone
	o.settle(tok, m)
	o.res.Acked++
}

// AckFailed records that an ack of tok returned an error: it did not take
// effect (the lease was lost).
func (o *Oracle) AckFailed(tok string) {
	m := o.get(tok)
	if m.ack == ackAttempted {
		m.ack = ackNone
	}
	m.leased = false
}

// Released records that the consumer of tok gave it back (nack,
// dead-letter, expired lease): it stays in the queue.
func (o *Oracle) Released(tok string) { o.get(tok).leased = false }

// Recovered checks a recovery point: drained is every token a full drain
// of the recovered queue returned (its dead letters included). It resolves
// the attempts that were in flight, ends every lease (the process that held
// them is gone) and returns what this check counted; the totals are in
// Result.
func (o *Oracle) Recovered(drained []string) Result {
	var r Result
	r.Checks, r.Drained = 1, len(drained)
	seen := make(map[string]int, len(drained))
	for _, tok := range drained {
		seen[tok]++
	}
	for _, tok := range sortedKeys(seen) {
		o.checkPresent(&r, tok, seen[tok])
	}
	for tok, m := range o.open {
		if seen[tok] == 0 {
			o.checkAbsent(&r, tok, m)
		}
	}
	o.res = o.res.Add(r)
	return r
}

// checkPresent handles a token the drain returned n times.
func (o *Oracle) checkPresent(r *Result, tok string, n int) {
	if n > 1 {
		r.DrainDuplicates++
		r.example("%s: %d times in one drain", tok, n)
	}
	m, ok := o.msgs[tok]
	switch {
	case !ok || m.enq == enqAbsent:
		r.Unexpected++
		r.example("%s: drained but never enqueued", tok)
		return
	case m.ack == ackDone:
		r.RedeliveredAfterAck++
		r.example("%s: drained after its ack returned", tok)
		return
	}
	if m.enq == enqAttempted {
		r.ResolvedPresent++
	}
	if m.leased || m.ack == ackAttempted {
		r.Duplicates++
	}
	m.enq, m.ack, m.leased = enqPresent, ackNone, false
}

// checkAbsent handles a token the drain did not return.
func (o *Oracle) checkAbsent(r *Result, tok string, m *msgState) {
	m.leased = false
	switch {
	case m.ack == ackAttempted:
		m.ack = ackDone // the ack took effect before the crash
		o.settle(tok, m)
		r.ResolvedAbsent++
	case m.enq == enqAttempted:
		m.enq = enqAbsent
		o.settle(tok, m)
		r.ResolvedAbsent++
	default:
		r.Lost++
		r.example("%s: acknowledged enqueue missing from the drain", tok)
	}
}

// Clone returns an Oracle that has seen what o has seen, so that one
// history can be checked against several recoveries.
func (o *Oracle) Clone() *Oracle {
	c := &Oracle{msgs: make(map[string]*msgState, len(o.msgs)), open: make(map[string]*msgState, len(o.open)), res: o.res}
	c.res.Examples = append([]string(nil), o.res.Examples...)
	for tok, m := range o.msgs {
		cm := *m
		c.msgs[tok] = &cm
		if o.open[tok] != nil {
			c.open[tok] = &cm
		}
	}
	return c
}

// Result returns the totals so far.
func (o *Oracle) Result() Result { return o.res }

// Tokens returns how many tokens the Oracle knows.
func (o *Oracle) Tokens() int { return len(o.msgs) }

// Live returns the tokens that must be in the queue now: enqueued and not
// consumed, sorted.
func (o *Oracle) Live() []string {
	var out []string
	for tok, m := range o.open {
		if m.enq == enqPresent && m.ack == ackNone {
			out = append(out, tok)
		}
	}
	sort.Strings(out)
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
