package redisq_test

import (
	"bufio"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// killOracle holds what the kill loop's children were told (their
// journals) against what the queue delivered and holds, and counts what
// the queue must never do:
//
//   - lost: an enqueue that returned nil, of a token neither acked (nor
//     possibly acked: an ack whose outcome is unknown), nor dead, nor
//     drained at a checkpoint;
//   - unexpected: a token delivered, dead or drained whose enqueue was
//     never sent, or that comes back after a checkpoint drained the
//     queue;
//   - redelivered after ack: a delivery of a token that began after an
//     ack of it returned nil, or one with more deliveries than the acked
//     one (no requeue from the dead set between), or a token dead or
//     drained after such an ack;
//   - payload: a delivery whose bytes or id are not the enqueued ones;
//   - count down: two deliveries of a token, one begun after the other
//     returned and no requeue from the dead set between, whose delivery
//     counts do not increase; or two with the same count;
//   - duplicate unfounded: an enqueue refused as a duplicate whose id no
//     earlier attempt was shown to enqueue (returned nil, or seen since);
//   - extend lost early: an Extend of a delivery that returned
//     ErrLeaseLost sortedKillMargin or more before the lease's deadline
//     (the dequeue's call plus the cycle's AckTimeout, or an earlier
//     Extend's that returned nil), with no kill of the server sent
//     between the lease's last setting and the Extend's return and no
//     Extend of unknown outcome between;
//   - overlap: a delivery of a token begun after an extended delivery of
//     it returned and returned before the deadline an Extend of that
//     delivery that returned nil set (its send plus its d, less
//     sortedKillMargin): the child acks an extended delivery or leaves it,
//     so nothing of its own ends that lease sooner.
type killOracle struct {
	toks   map[string]*killTok
	dupIDs map[string]string // id refused as duplicate → the refused token
	closed map[string]bool   // tokens settled by a checkpoint drain
	counts killCounts
	bad    []string // the first violations, for the failure message
}

// killTok is what is known of one token.
type killTok struct {
	sent, enqueued bool // its enqueue was sent; returned nil
	id             string
	acks, lost     int   // acks sent; of those, refused with ErrLeaseLost
	ackedAt        int64 // when an ack returned nil (0: none)
	ackedN         int   // the delivery count of that ack
	requeued       []int64
	deliveries     []killDelivery
	extends        []killExtend // in the order sent, each after its delivery
	seen           bool         // delivered, dead or drained
}

type killDelivery struct {
	id, seq string // its id; its receipt's seq (a sorted value's: its batch's lease)
	n       int
	t0, t1  int64
}

// killExtend is one Extend of a delivery's lease.
type killExtend struct {
	seq     string // the delivery's receipt seq and count
	n       int
	sent, d int64 // sent at (L?), its d in ns
	ret     int64 // returned nil or ErrLeaseLost at (0: no such line)
	outcome byte  // '+' nil, 'L' ErrLeaseLost, '!' another error, '?' no return journaled
	checked bool  // judged at the end of its cycle, by that cycle's AckTimeout and kills
}

// killCounts are the kill loop's figures.
type killCounts struct {
	Cycles, ServerKills, ChildKills                       int
	Sent, Enqueued, Unknown, DupRefused                   int
	Delivered, Acked, AckLost, AckUnknown, Requeued, Dead int
	Drained                                               int
	Lost, Unexpected, RedeliveredAfterAck, Payload        int
	CountDown, DupUnfounded                               int
	// Extended, ExtendLost and ExtendUnknown count the Extends that
	// returned nil, ErrLeaseLost, another error; ExtJudged those (nil or
	// ErrLeaseLost) the extend-lost-early check could judge, ExtUnjudged
	// those that returned ErrLeaseLost it could not; OverlapChecks the
	// deliveries the overlap check could judge against an extended one.
	Extended, ExtendLost, ExtendUnknown, ExtJudged, ExtUnjudged, OverlapChecks int
	ExtLostEarly, Overlap                                                      int
}

func (c killCounts) String() string {
	return fmt.Sprintf("cycles=%d server-kills=%d child-kills=%d sent=%d enqueued=%d unknown=%d dup-refused=%d "+
		"delivered=%d acked=%d ack-lease-lost=%d ack-unknown=%d dead-seen=%d requeued-from-dead=%d drained=%d "+
		"extended=%d extend-lease-lost=%d extend-unknown=%d checked: extend-deadlines=%d (lease-lost unjudged %d) extended-pairs=%d | "+
		"lost=%d unexpected=%d redelivered-after-ack=%d payload=%d count-down=%d dup-unfounded=%d extend-lost-early=%d overlap=%d",
		c.Cycles, c.ServerKills, c.ChildKills, c.Sent, c.Enqueued, c.Unknown, c.DupRefused,
		c.Delivered, c.Acked, c.AckLost, c.AckUnknown, c.Dead, c.Requeued, c.Drained,
		c.Extended, c.ExtendLost, c.ExtendUnknown, c.ExtJudged, c.ExtUnjudged, c.OverlapChecks,
		c.Lost, c.Unexpected, c.RedeliveredAfterAck, c.Payload, c.CountDown, c.DupUnfounded, c.ExtLostEarly, c.Overlap)
}

func (c killCounts) violations() int {
	return c.Lost + c.Unexpected + c.RedeliveredAfterAck + c.Payload + c.CountDown + c.DupUnfounded +
		c.ExtLostEarly + c.Overlap
}

func newKillOracle() *killOracle {
	return &killOracle{toks: map[string]*killTok{}, dupIDs: map[string]string{}, closed: map[string]bool{}}
}

func (o *killOracle) violate(counter *int, format string, args ...any) {
	*counter++
	if len(o.bad) < 20 {
		o.bad = append(o.bad, fmt.Sprintf(format, args...))
	}
}

func (o *killOracle) tok(t string) *killTok {
	k := o.toks[t]
	if k == nil {
		k = &killTok{}
		o.toks[t] = k
	}
	return k
}

// readJournals takes in the journals of a cycle's children, all dead, run
// with ackTimeout, the server killed at serverKills: the enqueues sent
// first, so that a delivery read from one journal finds the enqueue
// another one sent; then it checks the cycle's Extends. A line a kill cut
// short (no newline) is dropped.
func (o *killOracle) readJournals(paths []string, ackTimeout time.Duration, serverKills []int64) error {
	var rest [][]string
	for _, path := range paths {
		lines, err := journalLines(path)
		if err != nil {
			return err
		}
		for _, f := range lines {
			if len(f) == 2 && f[0] == "E?" {
				o.tok(f[1]).sent = true
				o.counts.Sent++
				continue
			}
			rest = append(rest, f)
		}
	}
	var extended []string // the tokens with Extends this cycle
	for _, f := range rest {
		if err := o.line(f); err != nil {
			return fmt.Errorf("%q: %w", f, err)
		}
		if f[0] == "L?" {
			extended = append(extended, f[1])
		}
	}
	slices.Sort(extended)
	for _, tok := range slices.Compact(extended) {
		o.checkExtends(tok, o.toks[tok], ackTimeout, serverKills)
	}
	return nil
}

// journalLines returns the complete lines of a journal, split into fields.
func journalLines(path string) ([][]string, error) {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil, nil // killed before its first line
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var lines [][]string
	r := bufio.NewReader(f)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return lines, nil // EOF, with or without a torn last line
		}
		if fs := strings.Fields(line); len(fs) > 0 {
			lines = append(lines, fs)
		}
	}
}

func (o *killOracle) line(f []string) error {
	if f[0] == "X" {
		o.violate(&o.counts.Payload, "%s", strings.Join(f[1:], " "))
		return nil
	}
	if len(f) < 2 {
		return fmt.Errorf("short line")
	}
	k := o.tok(f[1])
	switch f[0] {
	case "E+":
		k.enqueued, k.id = true, f[2]
		o.counts.Enqueued++
		for _, d := range k.deliveries {
			o.checkID(f[1], k, d.id)
		}
	case "E!":
		o.counts.Unknown++
	case "ED":
		o.dupIDs[f[2]] = f[1]
		o.counts.DupRefused++
	case "A?":
		k.acks++
	case "AL":
		k.lost++
		o.counts.AckLost++
	case "A!":
		o.counts.AckUnknown++
	case "A+":
		return o.acked(f[1], k, f[2:])
	case "D":
		return o.delivery(f[1], k, f[2:])
	case "L?", "L+", "LL", "L!":
		return o.extendLine(k, f)
	default:
		return fmt.Errorf("unknown line kind")
	}
	return nil
}

// nums parses the number fields of a journal line. A field that is not a
// number is an error, not a 0 that would turn a check off (an ack at time
// 0 is no ack).
func nums(fs ...string) ([]int64, error) {
	ns := make([]int64, len(fs))
	for i, f := range fs {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("field %q: %w", f, err)
		}
		ns[i] = n
	}
	return ns, nil
}

func (o *killOracle) acked(tok string, k *killTok, f []string) error {
	if len(f) != 3 {
		return fmt.Errorf("ack line of %d fields", len(f))
	}
	n, err := nums(f[1], f[2])
	if err != nil {
		return err
	}
	o.counts.Acked++
	k.ackedAt, k.ackedN = n[1], int(n[0])
	o.checkAcked(tok, k)
	return nil
}

func (o *killOracle) delivery(tok string, k *killTok, f []string) error {
	if len(f) != 5 {
		return fmt.Errorf("delivery line of %d fields", len(f))
	}
	n, err := nums(f[2], f[3], f[4])
	if err != nil {
		return err
	}
	o.counts.Delivered++
	d := killDelivery{id: f[0], seq: f[1], n: int(n[0]), t0: n[1], t1: n[2]}
	o.observed(tok, k, "delivered")
	o.checkID(tok, k, d.id)
	for _, e := range k.deliveries {
		o.checkOrder(tok, k, e, d)
	}
	k.deliveries = append(k.deliveries, d)
	o.checkAcked(tok, k)
	return nil
}

// extendLine takes in "L? tok seq n t d", "L+ tok seq n t", "LL tok seq n
// t", "L! tok seq n" of token k.
func (o *killOracle) extendLine(k *killTok, f []string) error {
	if len(f) < 4 {
		return fmt.Errorf("extend line of %d fields", len(f))
	}
	n, err := strconv.Atoi(f[3])
	if err != nil {
		return fmt.Errorf("field %q: %w", f[3], err)
	}
	if f[0] == "L?" {
		if len(f) != 6 {
			return fmt.Errorf("extend line of %d fields", len(f))
		}
		v, err := nums(f[4], f[5])
		if err != nil {
			return err
		}
		k.extends = append(k.extends, killExtend{seq: f[2], n: n, sent: v[0], d: v[1], outcome: '?'})
		return nil
	}
	i := slices.IndexFunc(k.extends, func(e killExtend) bool { return e.seq == f[2] && e.n == n && e.outcome == '?' })
	if i < 0 {
		return fmt.Errorf("an extend returned that was not sent")
	}
	e := &k.extends[i]
	e.ret, e.outcome, err = extendEnd(f, 5)
	countExtend(e.outcome, &o.counts.Extended, &o.counts.ExtendLost, &o.counts.ExtendUnknown)
	return err
}

// extendEnd reads the line f that journals how an Extend ended, of
// either kill loop ("L+"/"E+" nil, "LL"/"EL" ErrLeaseLost, both with
// fields fields, the last its return time; anything else another error):
// its return time and outcome ('+', 'L' or '!').
func extendEnd(f []string, fields int) (int64, byte, error) {
	if k := f[0][1]; k != '+' && k != 'L' {
		return 0, '!', nil
	}
	if len(f) != fields {
		return 0, '?', fmt.Errorf("extend line of %d fields", len(f))
	}
	v, err := nums(f[fields-1])
	if err != nil {
		return 0, '?', err
	}
	return v[0], f[0][1], nil
}

// countExtend counts an Extend's outcome ('+', 'L', '!'; '?' not at
// all: a line that could not be read) in a kill loop's figures.
func countExtend(outcome byte, extended, lost, unknown *int) {
	switch outcome {
	case '+':
		*extended++
	case 'L':
		*lost++
	case '!':
		*unknown++
	}
}

// checkExtends checks the Extends of token k sent this cycle (run with
// ackTimeout, the server killed at kills), each against the delivery it
// extends (the last of its seq and count returned before it was sent):
// ErrLeaseLost not before the lease's deadline as it stood, and no other
// delivery of the token while the deadline an Extend that returned nil
// set lay ahead.
func (o *killOracle) checkExtends(tok string, k *killTok, ackTimeout time.Duration, kills []int64) {
	for i := range k.extends {
		e := &k.extends[i]
		if e.checked {
			continue // of an earlier cycle
		}
		e.checked = true
		d := k.extended(*e)
		if d == nil || e.ret == 0 {
			continue
		}
		from, deadline, doubt := d.t0, d.t0+int64(ackTimeout), false
		for _, p := range k.extends[:i] {
			if p.seq != e.seq || p.n != e.n || p.sent < d.t1 {
				continue // another delivery's
			}
			if p.outcome == '+' {
				from, deadline, doubt = p.sent, p.sent+p.d, false
			} else {
				doubt = true
			}
		}
		killed := slices.ContainsFunc(kills, func(t int64) bool { return t >= from && t <= e.ret })
		switch {
		case doubt || killed || e.ret+int64(sortedKillMargin) >= deadline:
			if e.outcome == 'L' {
				o.counts.ExtUnjudged++
			}
		case e.outcome == 'L':
			o.counts.ExtJudged++
			o.violate(&o.counts.ExtLostEarly, "%s delivery %d (seq %s, dequeued from %d): an Extend sent %d returned ErrLeaseLost at %d, %v before its deadline %d (lease last set %d)",
				tok, d.n, d.seq, d.t0, e.sent, e.ret, time.Duration(deadline-e.ret), deadline, from)
		default:
			o.counts.ExtJudged++
		}
		if e.outcome == '+' {
			o.checkExtendedHeld(tok, k, d, e.sent+e.d)
		}
	}
}

// extended returns the delivery of k that Extend e extends: the last of
// its seq and count returned before e was sent; nil when none is known.
func (k *killTok) extended(e killExtend) *killDelivery {
	for i := len(k.deliveries) - 1; i >= 0; i-- {
		if d := &k.deliveries[i]; d.seq == e.seq && d.n == e.n && d.t1 <= e.sent {
			return d
		}
	}
	return nil
}

// checkExtendedHeld checks that no delivery of the token began after
// delivery d returned and returned before to (an Extend of d that
// returned nil set its lease to run out then, at the earliest), less
// sortedKillMargin. A delivery begun later shows nothing.
func (o *killOracle) checkExtendedHeld(tok string, k *killTok, d *killDelivery, to int64) {
	for _, e := range k.deliveries {
		if e.t0 <= d.t1 || e.t0 >= to-int64(sortedKillMargin) {
			continue
		}
		o.counts.OverlapChecks++
		if e.t1+int64(sortedKillMargin) < to {
			o.violate(&o.counts.Overlap, "%s delivered (delivery %d, from %d to %d) while delivery %d (seq %s) was extended to %d",
				tok, e.n, e.t0, e.t1, d.n, d.seq, to)
		}
	}
}

// checkID checks that a token enqueued under an id is delivered under it.
func (o *killOracle) checkID(tok string, k *killTok, id string) {
	if k.enqueued && k.id != id {
		o.violate(&o.counts.Payload, "%s enqueued as %s, delivered as %s", tok, k.id, id)
	}
}

// observed checks a token delivered, dead or drained: its enqueue was
// sent, and no checkpoint settled it.
func (o *killOracle) observed(tok string, k *killTok, how string) {
	k.seen = true
	if !k.sent {
		o.violate(&o.counts.Unexpected, "%s %s, never enqueued", tok, how)
	}
	if o.closed[tok] {
		o.violate(&o.counts.Unexpected, "%s %s after a checkpoint drained the queue", tok, how)
	}
}

// requeuedBetween reports whether the token was requeued from the dead
// set between two times.
func (k *killTok) requeuedBetween(a, b int64) bool {
	for _, r := range k.requeued {
		if r > a && r < b {
			return true
		}
	}
	return false
}

// checkOrder checks two deliveries of one token: a later one (begun after
// the other returned) has a higher count; two have the same count only
// across a requeue from the dead set.
func (o *killOracle) checkOrder(tok string, k *killTok, a, b killDelivery) {
	if b.t0 < a.t0 {
		a, b = b, a
	}
	if k.requeuedBetween(a.t0, b.t1) {
		return
	}
	if b.t0 > a.t1 && b.n <= a.n || a.n == b.n {
		o.violate(&o.counts.CountDown, "%s delivered as delivery %d, then (begun after) as delivery %d", tok, a.n, b.n)
	}
}

// checkAcked checks the deliveries of an acked token: none begun after the
// ack returned, none counted past the acked delivery.
func (o *killOracle) checkAcked(tok string, k *killTok) {
	if k.ackedAt == 0 {
		return
	}
	for _, d := range k.deliveries {
		late := d.t0 > k.ackedAt
		past := d.n > k.ackedN && len(k.requeued) == 0
		if late || past {
			o.violate(&o.counts.RedeliveredAfterAck, "%s delivered (delivery %d, begun %d) after its delivery %d was acked (%d)",
				tok, d.n, d.t0, k.ackedN, k.ackedAt)
			k.ackedAt = 0 // once per token
			return
		}
	}
}

// maybeAcked reports whether an ack of the token returned nil or has an
// unknown outcome.
func (k *killTok) maybeAcked() bool { return k.ackedAt != 0 || k.acks > k.lost }

// present takes in a token the queue holds (dead, or drained) at a check.
func (o *killOracle) present(tok, how string) {
	k := o.tok(tok)
	o.observed(tok, k, how)
	if k.ackedAt != 0 {
		o.violate(&o.counts.RedeliveredAfterAck, "%s %s after an ack of it returned nil", tok, how)
	}
}

// checkpoint is called once the queue was drained and its dead set
// purged, with what the drain and the dead set held: every enqueue that
// returned nil is accounted for, every refused duplicate had an earlier
// enqueue, and the tokens known so far are settled.
func (o *killOracle) checkpoint(held map[string]bool) {
	for tok, k := range o.toks {
		if o.closed[tok] {
			continue
		}
		if k.enqueued && !k.maybeAcked() && !held[tok] {
			o.violate(&o.counts.Lost, "%s (id %s) enqueued, never acked, not in the queue", tok, k.id)
		}
	}
	for id, tok := range o.dupIDs {
		if !o.enqueuedBefore(id, tok) {
			o.violate(&o.counts.DupUnfounded, "%s refused as a duplicate: no earlier attempt of %s was enqueued", tok, id)
		}
	}
	o.dupIDs = map[string]string{}
	for tok := range o.toks {
		o.closed[tok] = true
	}
}

// enqueuedBefore reports whether an attempt of id before tok returned nil
// or was seen in the queue.
func (o *killOracle) enqueuedBefore(id, tok string) bool {
	n, err := strconv.Atoi(strings.TrimPrefix(tok[len(id):], ".a"))
	if err != nil {
		return false // not a token of this id: the refusal stays unfounded
	}
	for a := 0; a < n; a++ {
		if k := o.toks[fmt.Sprintf("%s.a%d", id, a)]; k != nil && (k.enqueued || k.seen) {
			return true
		}
	}
	// An id of another attempt, sent since as a retry of an earlier one
	// and still unknown, does not count: attempts are numbered in order.
	return false
}
