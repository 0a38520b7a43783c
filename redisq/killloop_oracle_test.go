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
//     so nothing of its own ends that lease sooner;
//   - ack lost early: an ack that returned ErrLeaseLost sortedKillMargin or
//     more before its lease's deadline as it stood when the ack was sent
//     (as for an Extend), with no kill of the server sent between the
//     lease's last setting and the ack's return, no Extend of unknown
//     outcome and no nack or dead-letter of the delivery sent before it;
//   - lease overlap: a delivery of a token begun after another delivery
//     of it returned and returned sortedKillMargin or more before that
//     one's lease surely still held (its dequeue's call plus its cycle's
//     AckTimeout, or the send of a nack or dead-letter of it if sooner),
//     server kills between the two or not.
type killOracle struct {
	toks   map[string]*killTok
	dupIDs map[string]string // id refused as duplicate → the refused token
	closed map[string]bool   // tokens settled by a checkpoint drain
	counts killCounts
	bad    []string // the first violations, for the failure message
	// ackTimeout is the AckTimeout of the cycle whose journals are
	// being read (readJournals), given to its deliveries.
	ackTimeout time.Duration
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
	settles        []killSettle // in the order sent, each after its delivery
	seen           bool         // delivered, dead or drained
}

type killDelivery struct {
	id, seq    string // its id; its receipt's seq (a sorted value's: its batch's lease)
	n          int
	t0, t1     int64
	ackTimeout int64 // ns: the AckTimeout of the child that dequeued it
	checked    bool  // checked against the token's other deliveries (checkHeld)
}

// killSettle is one ack, nack or dead-letter of a delivery.
type killSettle struct {
	seq     string // the delivery's receipt seq and count
	n       int
	how     string // "ack", "nack", "dead"
	sent    int64  // sent at (A?, S?)
	ret     int64  // an ack's: returned nil or ErrLeaseLost at (0: no such line)
	outcome byte   // an ack's: '+' nil, 'L' ErrLeaseLost, '!' another error, '?' no return journaled
	checked bool   // an ack's: judged at the end of its cycle (checkAcks)
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
	// AckJudged counts the acks (nil or ErrLeaseLost) the ack-lost-early
	// check could judge, AckUnjudged those that returned ErrLeaseLost it
	// could not; HeldChecks the pairs of deliveries (one begun after the
	// other returned) the lease-overlap check compared.
	AckJudged, AckUnjudged, HeldChecks int
	AckLostEarly, LeaseOverlap         int
}

func (c killCounts) String() string {
	return fmt.Sprintf("cycles=%d server-kills=%d child-kills=%d sent=%d enqueued=%d unknown=%d dup-refused=%d "+
		"delivered=%d acked=%d ack-lease-lost=%d ack-unknown=%d dead-seen=%d requeued-from-dead=%d drained=%d "+
		"extended=%d extend-lease-lost=%d extend-unknown=%d checked: extend-deadlines=%d (lease-lost unjudged %d) extended-pairs=%d "+
		"ack-deadlines=%d (lease-lost unjudged %d) lease-pairs=%d | "+
		"lost=%d unexpected=%d redelivered-after-ack=%d payload=%d count-down=%d dup-unfounded=%d extend-lost-early=%d overlap=%d "+
		"ack-lost-early=%d lease-overlap=%d",
		c.Cycles, c.ServerKills, c.ChildKills, c.Sent, c.Enqueued, c.Unknown, c.DupRefused,
		c.Delivered, c.Acked, c.AckLost, c.AckUnknown, c.Dead, c.Requeued, c.Drained,
		c.Extended, c.ExtendLost, c.ExtendUnknown, c.ExtJudged, c.ExtUnjudged, c.OverlapChecks,
		c.AckJudged, c.AckUnjudged, c.HeldChecks,
		c.Lost, c.Unexpected, c.RedeliveredAfterAck, c.Payload, c.CountDown, c.DupUnfounded, c.ExtLostEarly, c.Overlap,
		c.AckLostEarly, c.LeaseOverlap)
}

func (c killCounts) violations() int {
	return c.Lost + c.Unexpected + c.RedeliveredAfterAck + c.Payload + c.CountDown + c.DupUnfounded +
		c.ExtLostEarly + c.Overlap + c.AckLostEarly + c.LeaseOverlap
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
// another one sent; then it checks the cycle's Extends, acks and
// deliveries. A line a kill cut short (no newline) is dropped.
func (o *killOracle) readJournals(paths []string, ackTimeout time.Duration, serverKills []int64) error {
	o.ackTimeout = ackTimeout
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
	var touched []string // the tokens delivered, extended or settled this cycle
	for _, f := range rest {
		if err := o.line(f); err != nil {
			return fmt.Errorf("%q: %w", f, err)
		}
		if f[0] == "L?" || f[0] == "D" || f[0] == "A?" || f[0] == "S?" {
			touched = append(touched, f[1])
		}
	}
	slices.Sort(touched)
	for _, tok := range slices.Compact(touched) {
		k := o.toks[tok]
		o.checkExtends(tok, k, ackTimeout, serverKills)
		o.checkAcks(tok, k, serverKills)
		o.checkHeld(tok, k)
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
	case "A?", "S?":
		return o.settleLine(k, f)
	case "AL":
		k.lost++
		o.counts.AckLost++
		return k.ackEnd(f)
	case "A!":
		o.counts.AckUnknown++
		return k.ackEnd(f)
	case "A+":
		if err := o.acked(f[1], k, f[2:]); err != nil {
			return err
		}
		return k.ackEnd(f)
	case "D":
		return o.delivery(f[1], k, f[2:])
	case "L?", "L+", "LL", "L!":
		return o.extendLine(k, f)
	default:
		return fmt.Errorf("unknown line kind")
	}
	return nil
}

// settleLine takes in "A? tok seq n t" and "S? tok seq n t how" of token
// k: an ack, nack or dead-letter about to be sent.
func (o *killOracle) settleLine(k *killTok, f []string) error {
	how, want := "ack", 5
	if f[0] == "S?" {
		want = 6
	}
	if len(f) != want {
		return fmt.Errorf("settle line of %d fields", len(f))
	}
	if f[0] == "S?" {
		if how = f[5]; how != "nack" && how != "dead" {
			return fmt.Errorf("settle %q", how)
		}
	} else {
		k.acks++
	}
	v, err := nums(f[3], f[4])
	if err != nil {
		return err
	}
	k.settles = append(k.settles, killSettle{seq: f[2], n: int(v[0]), how: how, sent: v[1], outcome: '?'})
	return nil
}

// ackEnd takes in how an ack of token k ended ("A+", "AL" with their
// return times, "A!").
func (k *killTok) ackEnd(f []string) error {
	if len(f) < 4 {
		return fmt.Errorf("ack line of %d fields", len(f))
	}
	n, err := strconv.Atoi(f[3])
	if err != nil {
		return fmt.Errorf("field %q: %w", f[3], err)
	}
	i := slices.IndexFunc(k.settles, func(s killSettle) bool {
		return s.how == "ack" && s.seq == f[2] && s.n == n && s.outcome == '?'
	})
	if i < 0 {
		return fmt.Errorf("an ack returned that was not sent")
	}
	s := &k.settles[i]
	s.ret, s.outcome, err = extendEnd(f, 5)
	return err
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
	d := killDelivery{id: f[0], seq: f[1], n: int(n[0]), t0: n[1], t1: n[2], ackTimeout: int64(o.ackTimeout)}
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
		o.judgeLeaseCall(leaseCall{tok: tok, d: d, what: "an Extend", refused: e.outcome == 'L', doubt: doubt,
			from: from, sent: e.sent, ret: e.ret, deadline: deadline},
			kills, &o.counts.ExtJudged, &o.counts.ExtUnjudged, &o.counts.ExtLostEarly)
		if e.outcome == '+' {
			o.checkExtendedHeld(tok, k, d, e.sent+e.d)
		}
	}
}

// extended returns the delivery of k that Extend e extends: the last of
// its seq and count returned before e was sent; nil when none is known.
func (k *killTok) extended(e killExtend) *killDelivery { return k.deliveryOf(e.seq, e.n, e.sent) }

// deliveryOf returns the delivery of k with receipt seq seq and count n
// that a call sent at sent acts on: the last of them returned before it;
// nil when none is known.
func (k *killTok) deliveryOf(seq string, n int, sent int64) *killDelivery {
	for i := len(k.deliveries) - 1; i >= 0; i-- {
		if d := &k.deliveries[i]; d.seq == seq && d.n == n && d.t1 <= sent {
			return d
		}
	}
	return nil
}

// leaseCall is an Extend or an ack of delivery d of token tok, sent and
// returned at those times, against the lease's deadline as it stood when
// it was sent (last set at from; doubt: not known).
type leaseCall struct {
	tok                       string
	d                         *killDelivery
	what                      string // "an Extend", "an ack"
	refused, doubt            bool   // returned ErrLeaseLost; deadline unknown
	from, sent, ret, deadline int64
}

// judgeLeaseCall counts c in judged, or in unjudged if refused but in
// doubt, with a server kill between its lease's last setting and its
// return, or returned within sortedKillMargin of the deadline; a refusal
// judged is a violation counted in lost: a lease ended before its time.
func (o *killOracle) judgeLeaseCall(c leaseCall, kills []int64, judged, unjudged, lost *int) {
	killed := slices.ContainsFunc(kills, func(t int64) bool { return t >= c.from && t <= c.ret })
	switch {
	case c.doubt || killed || c.ret+int64(sortedKillMargin) >= c.deadline:
		if c.refused {
			*unjudged++
		}
	case c.refused:
		*judged++
		o.violate(lost, "%s delivery %d (seq %s, dequeued from %d): %s sent %d returned ErrLeaseLost at %d, %v before its deadline %d (lease last set %d)",
			c.tok, c.d.n, c.d.seq, c.d.t0, c.what, c.sent, c.ret, time.Duration(c.deadline-c.ret), c.deadline, c.from)
	default:
		*judged++
	}
}

// checkAcks checks the acks of token k sent this cycle (the server killed
// at kills) that returned nil or ErrLeaseLost, as checkExtends checks an
// Extend: the lease's deadline as it stood when the ack was sent is the
// dequeue's call plus the AckTimeout, or the last earlier Extend's of the
// delivery that returned nil (its send plus its d); an Extend of unknown
// outcome, one refused, or a nack or dead-letter sent before leaves it in
// doubt. One that returned ErrLeaseLost sortedKillMargin or more before
// that deadline, no kill of the server between the lease's last setting
// and its return, is a violation: a consumer that acks in time keeps
// its message.
func (o *killOracle) checkAcks(tok string, k *killTok, kills []int64) {
	for i := range k.settles {
		a := &k.settles[i]
		if a.checked || a.how != "ack" {
			continue
		}
		a.checked = true
		d := k.deliveryOf(a.seq, a.n, a.sent)
		if d == nil || a.ret == 0 {
			continue
		}
		from, deadline, doubt := d.t0, d.t0+d.ackTimeout, false
		for _, p := range k.extends {
			if p.seq != a.seq || p.n != a.n || p.sent < d.t1 || p.sent > a.sent {
				continue // another delivery's, or sent after the ack
			}
			if p.outcome == '+' {
				from, deadline, doubt = p.sent, p.sent+p.d, false
			} else {
				doubt = true
			}
		}
		for _, s := range k.settles[:i] {
			doubt = doubt || s.how != "ack" && s.seq == a.seq && s.n == a.n
		}
		o.judgeLeaseCall(leaseCall{tok: tok, d: d, what: "an ack", refused: a.outcome == 'L', doubt: doubt,
			from: from, sent: a.sent, ret: a.ret, deadline: deadline},
			kills, &o.counts.AckJudged, &o.counts.AckUnjudged, &o.counts.AckLostEarly)
	}
}

// heldTo is when delivery d's lease surely still held: its dequeue's
// call plus its AckTimeout (the script set the deadline from a later
// reading of the same clock), or, if sooner, the send of a nack or
// dead-letter of it, which may have ended it then. An Extend only moves
// the deadline later; an ack that ran leaves no message to deliver.
func (k *killTok) heldTo(d *killDelivery) int64 {
	to := d.t0 + d.ackTimeout
	for _, s := range k.settles {
		if s.how != "ack" && s.seq == d.seq && s.n == d.n {
			to = min(to, s.sent)
		}
	}
	return to
}

// checkHeld checks each delivery of token k not checked yet against the
// token's other deliveries: one begun after another returned must not
// return sortedKillMargin or more before the other's lease surely still
// held (heldTo). A kill of the server between the two excuses nothing:
// under appendfsync always the lease a dequeue returned is on disk, and
// the restarted server holds it to the same deadline. It counts the pairs
// compared. A token a checkpoint drained is left out: any delivery after
// it is unexpected.
func (o *killOracle) checkHeld(tok string, k *killTok) {
	if o.closed[tok] {
		return
	}
	for i := range k.deliveries {
		b := &k.deliveries[i]
		if b.checked {
			continue
		}
		b.checked = true
		for j := range k.deliveries {
			a := &k.deliveries[j]
			to := k.heldTo(a)
			switch {
			case j == i || b.t0 <= a.t1:
			case b.t1+int64(sortedKillMargin) >= to:
				o.counts.HeldChecks++
			default:
				o.counts.HeldChecks++
				o.violate(&o.counts.LeaseOverlap, "%s delivered (delivery %d, from %d to %d) while delivery %d (seq %s, dequeued from %d) held its lease until %d at least",
					tok, b.n, b.t0, b.t1, a.n, a.seq, a.t0, to)
			}
		}
	}
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
