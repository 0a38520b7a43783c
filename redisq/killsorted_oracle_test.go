package redisq_test

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// sortedKillMargin is how far the oracle lets two readings of the wall
// clock in different processes disagree before it calls a batch early
// (pulled before its key's window closed, or before its nack's delay
// passed): the processes share one host and its clock, so the margin
// covers only a step or slew of that clock between the readings, never
// a skew between hosts.
const sortedKillMargin = 20 * time.Millisecond

// sortedOracle holds what the sorted kill loop's children were told (their
// journals) against what the sorted and windowed queues delivered and
// hold, and counts what the queues must never do:
//
//   - lost: a publish that returned nil, of a token no ack (returned nil,
//     or unknown) of a batch holding it settled, not dead, not drained at a
//     checkpoint;
//   - unexpected: a token pulled, dead or drained whose publish was never
//     sent, or that comes back after a checkpoint drained the queues;
//   - redelivered after ack: a batch holding a token pulled after an ack
//     of a batch holding it returned nil, or with more deliveries than the
//     acked one (no requeue from the dead set between), or a token dead or
//     drained after such an ack;
//   - payload: a value's bytes are not the published ones;
//   - wrong key: a value in a batch of a key it was not published under,
//     or in a batch of the other queue;
//   - wrong sort: a sorted value whose sort key is not the published one;
//     a windowed value whose sort key is not its PublishedAt, or whose
//     PublishedAt is outside its Publish call;
//   - order: a batch's values not in sort order (equal sort keys of one
//     publisher not in publish order); a Pull's batches not in the order
//     of their first sort keys (then key names);
//   - overlap: a batch pulled while another batch holding one of its
//     values was leased (its lease shown held by a settle that returned
//     nil later, or by an Extend that returned nil, until the deadline it
//     set, judged with sortedKillMargin), or, on a queue with
//     SingleFlight that cycle, while another batch of its key was so
//     leased;
//   - early: a windowed batch pulled before its oldest value's window
//     closed, or a batch of a key pulled before the delay of a nack of
//     the key passed (unless every nacked value went to the dead set),
//     judged with sortedKillMargin;
//   - count down: two pulls of a token, one begun after the other
//     returned and no requeue from the dead set between, whose delivery
//     counts do not increase; or two with the same count;
//   - lost early: a settle that returned ErrLeaseLost before the lease's
//     deadline (the one an Extend that returned nil set, else the pull's
//     call plus AckTimeout), judged with sortedKillMargin, when no kill of
//     the server was sent between the lease's last setting and the
//     settle's return and no Extend of unknown outcome may have moved it;
//   - extend lost early: an Extend that returned ErrLeaseLost before the
//     lease's deadline as it stood when it was sent (the pull's call plus
//     AckTimeout, or an earlier Extend's that returned nil), judged as a
//     settle is.
type sortedOracle struct {
	toks    map[string]*sortedTok
	closed  map[string]bool // tokens settled by a checkpoint drain
	counts  sortedCounts
	bad     []string        // the first violations, for the failure message
	badSeen map[string]bool // every violation counted, so that a check run again counts it once
}

// sortedTok is what is known of one published token.
type sortedTok struct {
	q, key     string // its queue ("s", "w") and key
	sort       int64  // its sort key (sorted queue)
	sent, done bool   // its publish was sent; returned nil
	t0, t1     int64  // the publish sent, returned (0: unknown)
	acks, lost int    // acks sent of batches holding it; of those, refused with ErrLeaseLost
	ackedAt    int64  // when an ack of a batch holding it returned nil (0: none)
	ackedN     int    // its delivery count in that batch
	requeued   []int64
	deliveries []sortedDelivery
	seen       bool // pulled, dead or drained
}

// sortedDelivery is one pull of a token.
type sortedDelivery struct {
	n      int    // its delivery count
	t0, t1 int64  // the Pull called, returned (Unix ns)
	lease  uint64 // the batch's lease
}

// sortedBatch is one batch a child pulled.
type sortedBatch struct {
	q, key     string
	lease      uint64
	t0, t1     int64 // the Pull called, returned
	win        time.Duration
	vals       []sortedVal
	sentAt     int64 // the last settle sent (S?)
	heldTo     int64 // the send of the last settle that returned nil: the lease held from t1 to then (0: not shown)
	nackSent   int64 // a nack that returned nil: sent, returned, its delay (0: none)
	nackRet    int64
	nackDelay  int64
	op         string         // the settle sent last
	lostAt     int64          // a settle returned ErrLeaseLost at (0: none)
	settledAt  int64          // a settle returned nil at (0: none)
	maxd       int            // the MaxDeliveries of the child that pulled it
	ackTimeout time.Duration  // its AckTimeout
	extends    []sortedExtend // its Extends, in the order sent (one child goroutine sends them)
}

// sortedExtend is one Extend of a batch's lease.
type sortedExtend struct {
	sent, d int64 // sent at (E?), its d in ns
	ret     int64 // it returned nil or ErrLeaseLost at (0: no such line)
	outcome byte  // '+' nil, 'L' ErrLeaseLost, '!' another error, '?' no return journaled
}

// leaseBefore is what b's journal shows of its lease's deadline when its
// i-th Extend (or, i = len(extends), anything after them) was sent: the
// lease was last set at from, to run out no earlier than deadline (the
// pull's call plus the AckTimeout, or the last Extend that returned nil,
// its send plus its d), and doubt when an Extend since may have moved it
// (outcome unknown) or found it lost.
func (b *sortedBatch) leaseBefore(i int) (from, deadline int64, doubt bool) {
	from, deadline = b.t0, b.t0+int64(b.ackTimeout)
	for _, e := range b.extends[:i] {
		if e.outcome == '+' {
			from, deadline, doubt = e.sent, e.sent+e.d, false
		} else {
			doubt = true
		}
	}
	return from, deadline, doubt
}

// extendedTo is when the Extends of b that returned nil show its lease
// held until: the deadline the last of them set, measured from no
// earlier than its send, or less when a later Extend of unknown outcome
// may have set a sooner one (no earlier than its send plus its d), or the
// send of a settle after them, which may have ended the lease sooner; 0
// when none shows it. It returns the send of that last Extend too.
func (b *sortedBatch) extendedTo() (to, sent int64) {
	for _, e := range b.extends {
		switch {
		case e.outcome == '+':
			to, sent = e.sent+e.d, e.sent
		case to != 0 && e.outcome != 'L':
			to = min(to, e.sent+e.d)
		}
	}
	if to != 0 && b.sentAt > sent {
		to = min(to, b.sentAt)
	}
	return to, sent
}

// lastExtend is b's last Extend sent, nil when none.
func (b *sortedBatch) lastExtend() *sortedExtend {
	if len(b.extends) == 0 {
		return nil
	}
	return &b.extends[len(b.extends)-1]
}

// sortedVal is one value of a batch, as pulled.
type sortedVal struct {
	tok       string
	sort, at  int64
	n         int
	publisher string // the token's publisher ("c1.k0.s2") and number, for publish order
	num       int
}

// sortedCounts are the sorted kill loop's figures.
type sortedCounts struct {
	Cycles, ServerKills, ChildKills                          int
	Sent, Published, Unknown                                 int
	Pulls, Batches, Delivered                                int
	Acked, Nacked, DeadLettered, SettleLost, SettleUnknown   int
	Extended, ExtendLost, ExtendUnknown                      int
	Dead, Requeued, Drained                                  int
	Lost, Unexpected, RedeliveredAfterAck, Payload, WrongKey int
	WrongSort, Order, Overlap, Early, CountDown              int
	OrderChecks, OverlapChecks, EarlyChecks, HoldChecks      int
	// DeadAtPull counts the dead values (listed between cycles) that a
	// pull found at its limit. LostJudged counts the settles (returned
	// nil or ErrLeaseLost) the lost-early check could judge, LostExtended
	// those of them after an Extend that returned nil, LostUnjudged the
	// settles that returned ErrLeaseLost it could not judge; LostEarly is
	// its violations.
	DeadAtPull, LostJudged, LostExtended, LostUnjudged, LostEarly int
	// ExtJudged counts the Extends (returned nil or ErrLeaseLost) the
	// extend-lost-early check could judge, ExtAgain those of them after
	// an earlier Extend of the batch that returned nil, ExtUnjudged the
	// Extends that returned ErrLeaseLost it could not judge; ExtLostEarly
	// is its violations.
	ExtJudged, ExtAgain, ExtUnjudged, ExtLostEarly int
}

// String is the counts on one line, as the test logs them.
func (c sortedCounts) String() string {
	return fmt.Sprintf("cycles=%d server-kills=%d child-kills=%d sent=%d published=%d unknown=%d "+
		"pulls=%d batches=%d delivered=%d acked=%d nacked=%d dead-lettered=%d settle-lease-lost=%d settle-unknown=%d "+
		"extended=%d extend-lease-lost=%d extend-unknown=%d "+
		"dead-seen=%d requeued-from-dead=%d drained=%d "+
		"dead-at-pull=%d checked: pull-orders=%d lease-pairs=%d windows=%d nack-holds=%d lease-deadlines=%d (extended %d; lease-lost unjudged %d) "+
		"extend-deadlines=%d (after an extend %d; lease-lost unjudged %d) | "+
		"lost=%d unexpected=%d redelivered-after-ack=%d payload=%d wrong-key=%d wrong-sort=%d order=%d overlap=%d early=%d count-down=%d "+
		"lost-early=%d extend-lost-early=%d",
		c.Cycles, c.ServerKills, c.ChildKills, c.Sent, c.Published, c.Unknown,
		c.Pulls, c.Batches, c.Delivered, c.Acked, c.Nacked, c.DeadLettered, c.SettleLost, c.SettleUnknown,
		c.Extended, c.ExtendLost, c.ExtendUnknown,
		c.Dead, c.Requeued, c.Drained,
		c.DeadAtPull, c.OrderChecks, c.OverlapChecks, c.EarlyChecks, c.HoldChecks, c.LostJudged, c.LostExtended, c.LostUnjudged,
		c.ExtJudged, c.ExtAgain, c.ExtUnjudged,
		c.Lost, c.Unexpected, c.RedeliveredAfterAck, c.Payload, c.WrongKey, c.WrongSort, c.Order, c.Overlap, c.Early, c.CountDown,
		c.LostEarly, c.ExtLostEarly)
}

// violations is the number of violations of every kind.
func (c sortedCounts) violations() int {
	return c.Lost + c.Unexpected + c.RedeliveredAfterAck + c.Payload + c.WrongKey + c.WrongSort +
		c.Order + c.Overlap + c.Early + c.CountDown + c.LostEarly + c.ExtLostEarly
}

// newSortedOracle returns an oracle that has read nothing.
func newSortedOracle() *sortedOracle {
	return &sortedOracle{toks: map[string]*sortedTok{}, closed: map[string]bool{}, badSeen: map[string]bool{}}
}

// violate counts a violation once, however often a check finds it.
func (o *sortedOracle) violate(counter *int, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if o.badSeen[msg] {
		return
	}
	o.badSeen[msg] = true
	*counter++
	if len(o.bad) < 20 {
		o.bad = append(o.bad, msg)
	}
}

// tok returns what is known of token t, made empty on its first mention.
func (o *sortedOracle) tok(t string) *sortedTok {
	k := o.toks[t]
	if k == nil {
		k = &sortedTok{}
		o.toks[t] = k
	}
	return k
}

// sortedCycle is what one cycle's journals hold, read in three passes.
type sortedCycle struct {
	single      map[string]bool         // the queues ("s", "w") with SingleFlight this cycle
	batches     map[string]*sortedBatch // by queue and lease
	pulls       [][]*sortedBatch        // each Pull's batches, in order
	serverKills []int64                 // when each kill of the server in the cycle was sent
}

// sortedJournal is one child's journal and the settings its lines are
// judged by.
type sortedJournal struct {
	path          string
	maxDeliveries int           // the child's MaxDeliveries
	ackTimeout    time.Duration // the child's AckTimeout
}

// readJournals takes in the journals of a cycle's children, all dead,
// run with SingleFlight on the queues single names, the server killed at
// serverKills: publishes first, then pulls, then settles and extends, so
// that a line finds what another journal says happened before it; then
// it runs the checks. A line a kill cut short (no newline) is dropped.
func (o *sortedOracle) readJournals(js []sortedJournal, single map[string]bool, serverKills []int64) error {
	type line struct {
		f []string
		j sortedJournal
	}
	var all []line
	for _, j := range js {
		lines, err := journalLines(j.path)
		if err != nil {
			return err
		}
		for _, f := range lines {
			all = append(all, line{f, j})
		}
	}
	cy := &sortedCycle{single: single, batches: map[string]*sortedBatch{}, serverKills: serverKills}
	for pass, kinds := range []string{"P? P+ P! X", "B", "S? S+ SL S! E? E+ EL E!"} {
		for _, l := range all {
			if !slices.Contains(strings.Fields(kinds), l.f[0]) {
				continue
			}
			if err := o.line(cy, l.f, l.j); err != nil {
				return fmt.Errorf("pass %d, %q: %w", pass, l.f, err)
			}
		}
	}
	o.check(cy)
	return nil
}

// line takes in one journal line of cycle cy, split into fields f, from
// journal j.
func (o *sortedOracle) line(cy *sortedCycle, f []string, j sortedJournal) error {
	switch f[0] {
	case "X":
		o.violate(&o.counts.Payload, "%s", strings.Join(f[1:], " "))
		return nil
	case "P?":
		return o.publishSent(f)
	case "B":
		return o.pulled(cy, f, j)
	}
	if len(f) < 2 {
		return fmt.Errorf("short line")
	}
	switch f[0] {
	case "P+":
		if len(f) != 3 {
			return fmt.Errorf("publish line of %d fields", len(f))
		}
		n, err := nums(f[2])
		if err != nil {
			return err
		}
		k := o.tok(f[1])
		k.done, k.t1 = true, n[0]
		o.counts.Published++
	case "P!":
		o.counts.Unknown++
	case "E?", "E+", "EL", "E!":
		return o.extended(cy, f)
	default:
		return o.settled(cy, f)
	}
	return nil
}

// publishSent takes in "P? tok q key sort t0".
func (o *sortedOracle) publishSent(f []string) error {
	if len(f) != 6 {
		return fmt.Errorf("publish line of %d fields", len(f))
	}
	n, err := nums(f[4], f[5])
	if err != nil {
		return err
	}
	k := o.tok(f[1])
	k.sent, k.q, k.key, k.sort, k.t0 = true, f[2], f[3], n[0], n[1]
	o.counts.Sent++
	return nil
}

// pulled takes in "B q t0 t1 win [| lease key tok:sort:at:n ...]...",
// from journal j.
func (o *sortedOracle) pulled(cy *sortedCycle, f []string, j sortedJournal) error {
	if len(f) < 5 {
		return fmt.Errorf("pull line of %d fields", len(f))
	}
	n, err := nums(f[2], f[3], f[4])
	if err != nil {
		return err
	}
	o.counts.Pulls++
	var pull []*sortedBatch
	for _, part := range strings.Split(strings.Join(f[5:], " "), "|")[1:] {
		b, err := parseSortedBatch(f[1], n[0], n[1], time.Duration(n[2]), strings.Fields(part))
		if err != nil {
			return err
		}
		b.maxd, b.ackTimeout = j.maxDeliveries, j.ackTimeout
		pull = append(pull, b)
		cy.batches[fmt.Sprint(b.q, b.lease)] = b
		o.counts.Batches++
		o.counts.Delivered += len(b.vals)
	}
	cy.pulls = append(cy.pulls, pull)
	return nil
}

// parseSortedBatch parses one batch of a pull line: lease, key, values.
func parseSortedBatch(q string, t0, t1 int64, win time.Duration, f []string) (*sortedBatch, error) {
	if len(f) < 3 {
		return nil, fmt.Errorf("batch %q: %d fields", f, len(f))
	}
	lease, err := strconv.ParseUint(f[0], 10, 64)
	if err != nil {
		return nil, fmt.Errorf("batch lease %q: %w", f[0], err)
	}
	b := &sortedBatch{q: q, key: f[1], lease: lease, t0: t0, t1: t1, win: win}
	for _, v := range f[2:] {
		p := strings.Split(v, ":")
		if len(p) != 4 {
			return nil, fmt.Errorf("value %q", v)
		}
		n, err := nums(p[1], p[2], p[3])
		if err != nil {
			return nil, err
		}
		sv := sortedVal{tok: p[0], sort: n[0], at: n[1], n: int(n[2])}
		if i := strings.LastIndex(sv.tok, ".n"); i >= 0 {
			sv.publisher = sv.tok[:i]
			sv.num, _ = strconv.Atoi(sv.tok[i+2:]) // 0 for a token not of this form: no publish order checked
		}
		b.vals = append(b.vals, sv)
	}
	return b, nil
}

// settled takes in "S? q op lease t arg", "S+ q op lease t", "SL q op
// lease t", "S! q op lease".
func (o *sortedOracle) settled(cy *sortedCycle, f []string) error {
	if len(f) < 4 {
		return fmt.Errorf("settle line of %d fields", len(f))
	}
	b := cy.batches[f[1]+f[3]]
	if b == nil {
		return fmt.Errorf("settle of a batch no pull of this cycle journaled")
	}
	op := f[2]
	switch f[0] {
	case "S?":
		if len(f) != 6 {
			return fmt.Errorf("settle line of %d fields", len(f))
		}
		n, err := nums(f[4], f[5])
		if err != nil {
			return err
		}
		b.sentAt, b.op = n[0], op
		if op == "nack" {
			b.nackDelay = n[1]
		}
		if op == "ack" {
			for _, v := range b.vals {
				o.tok(v.tok).acks++
			}
		}
	case "S+":
		if len(f) != 5 {
			return fmt.Errorf("settle line of %d fields", len(f))
		}
		n, err := nums(f[4])
		if err != nil {
			return err
		}
		return o.settledNil(b, op, n[0])
	case "SL":
		if len(f) != 5 {
			return fmt.Errorf("settle line of %d fields", len(f))
		}
		n, err := nums(f[4])
		if err != nil {
			return err
		}
		b.lostAt = n[0]
		o.counts.SettleLost++
		if op == "ack" {
			for _, v := range b.vals {
				o.tok(v.tok).lost++
			}
		}
	case "S!":
		o.counts.SettleUnknown++
	default:
		return fmt.Errorf("unknown line kind")
	}
	return nil
}

// extended takes in "E? q lease t d", "E+ q lease t", "EL q lease t",
// "E! q lease".
func (o *sortedOracle) extended(cy *sortedCycle, f []string) error {
	if len(f) < 3 {
		return fmt.Errorf("extend line of %d fields", len(f))
	}
	b := cy.batches[f[1]+f[2]]
	if b == nil {
		return fmt.Errorf("extend of a batch no pull of this cycle journaled")
	}
	switch f[0] {
	case "E?":
		if len(f) != 5 {
			return fmt.Errorf("extend line of %d fields", len(f))
		}
		n, err := nums(f[3], f[4])
		if err != nil {
			return err
		}
		b.extends = append(b.extends, sortedExtend{sent: n[0], d: n[1], outcome: '?'})
		return nil
	}
	e := b.lastExtend()
	if e == nil || e.outcome != '?' {
		return fmt.Errorf("an extend returned that was not sent")
	}
	var err error
	e.ret, e.outcome, err = extendEnd(f, 4)
	countExtend(e.outcome, &o.counts.Extended, &o.counts.ExtendLost, &o.counts.ExtendUnknown)
	return err
}

// settledNil takes in a settle of b that returned nil at t.
func (o *sortedOracle) settledNil(b *sortedBatch, op string, t int64) error {
	if b.sentAt == 0 || b.op != op {
		return fmt.Errorf("a settle returned that was not sent")
	}
	b.heldTo, b.settledAt = b.sentAt, t
	switch op {
	case "ack":
		o.counts.Acked++
		for _, v := range b.vals {
			k := o.tok(v.tok)
			k.ackedAt, k.ackedN = t, v.n
		}
	case "nack":
		o.counts.Nacked++
		b.nackSent, b.nackRet = b.sentAt, t
	case "dead":
		o.counts.DeadLettered++
	}
	return nil
}

// check runs the checks on a cycle read.
func (o *sortedOracle) check(cy *sortedCycle) {
	byKey := map[string][]*sortedBatch{}
	for _, b := range cy.batches {
		o.checkBatch(b)
		o.checkLostEarly(cy, b)
		o.checkExtendLostEarly(cy, b)
		byKey[b.q+" "+b.key] = append(byKey[b.q+" "+b.key], b)
	}
	for _, pull := range cy.pulls {
		o.checkPullOrder(pull)
	}
	for _, bs := range byKey {
		o.checkKey(cy, bs)
	}
	for _, b := range cy.batches {
		for _, v := range b.vals {
			if k := o.toks[v.tok]; k != nil {
				o.checkDeliveries(v.tok, k)
			}
		}
	}
}

// checkBatch checks one batch's values against their publishes: known,
// intact, of its key and queue, with their sort keys, in order, and, on
// the windowed queue, due.
func (o *sortedOracle) checkBatch(b *sortedBatch) {
	for i, v := range b.vals {
		if v.tok == "?" {
			continue // its payload was counted (X)
		}
		k := o.tok(v.tok)
		o.observed(v.tok, k, "pulled")
		k.deliveries = append(k.deliveries, sortedDelivery{n: v.n, t0: b.t0, t1: b.t1, lease: b.lease})
		if k.sent && (k.key != b.key || k.q != b.q) {
			o.violate(&o.counts.WrongKey, "%s published to %s under %s, pulled from %s in a batch of %s", v.tok, k.q, k.key, b.q, b.key)
		}
		o.checkSort(v, k)
		if i > 0 {
			o.checkValueOrder(b, b.vals[i-1], v)
		}
	}
	if b.q == "w" && len(b.vals) > 0 {
		o.checkWindow(b)
	}
}

// checkSort checks a value's sort key: the published one, or (windowed)
// its PublishedAt, within its Publish call.
func (o *sortedOracle) checkSort(v sortedVal, k *sortedTok) {
	if !k.sent {
		return
	}
	switch {
	case k.q == "s" && v.sort != k.sort:
		o.violate(&o.counts.WrongSort, "%s published at sort key %d, pulled at %d", v.tok, k.sort, v.sort)
	case k.q == "w" && v.sort != v.at:
		o.violate(&o.counts.WrongSort, "%s pulled at sort key %d, published at %d", v.tok, v.sort, v.at)
	case k.q == "w" && (v.at < k.t0 || k.t1 != 0 && v.at > k.t1):
		o.violate(&o.counts.WrongSort, "%s stamped %d, its Publish ran from %d to %d", v.tok, v.at, k.t0, k.t1)
	}
}

// checkValueOrder checks two neighbouring values of a batch: sort keys
// in order, equal ones of one publisher in publish order. Publish order
// is known only when the earlier publish returned nil before the later
// was sent: one whose outcome was unknown may have run after it.
func (o *sortedOracle) checkValueOrder(b *sortedBatch, a, v sortedVal) {
	before := v.num > 0 && a.publisher == v.publisher && a.num > v.num && o.tok(v.tok).done
	if v.sort < a.sort || v.sort == a.sort && before {
		o.violate(&o.counts.Order, "%s batch of %s (lease %d): %s (sort %d) before %s (sort %d)",
			b.q, b.key, b.lease, a.tok, a.sort, v.tok, v.sort)
	}
}

// checkWindow checks that a windowed batch was pulled once its oldest
// value's window had closed: that value was stamped no earlier than its
// Publish was sent, and the Pull read its clock no later than it returned.
func (o *sortedOracle) checkWindow(b *sortedBatch) {
	k := o.toks[b.vals[0].tok]
	if k == nil || !k.sent {
		return
	}
	o.counts.EarlyChecks++
	if due := k.t0 + int64(b.win); b.t1+int64(sortedKillMargin) < due {
		o.violate(&o.counts.Early, "windowed batch of %s (lease %d) pulled by %d, %v before its oldest value %s was due (published from %d, window %v)",
			b.key, b.lease, b.t1, time.Duration(due-b.t1), b.vals[0].tok, k.t0, b.win)
	}
}

// checkPullOrder checks that a Pull's batches come in the order of their
// keys' places (first sort key, then key name), under MaxDeliveries too:
// a key's place is the smallest sort key of its pending values
// (queue.Sorted), and a value that a pull sends to the dead set at the
// limit is no longer pending, so the key's place is that of the values
// left, which its batch shows; the pull puts the key there before it
// takes it (killPastLimit, scripts/sorted.lua), meeting it behind the
// keys placed before that. A Pull of the loop (at most 8 values) is one
// call to the server, so its batches are of one moment's order.
func (o *sortedOracle) checkPullOrder(pull []*sortedBatch) {
	for i := 1; i < len(pull); i++ {
		a, b := pull[i-1], pull[i]
		if len(a.vals) == 0 || len(b.vals) == 0 {
			continue
		}
		o.counts.OrderChecks++
		pa, pb := a.vals[0].sort, b.vals[0].sort
		if pb < pa || pb == pa && b.key < a.key {
			o.violate(&o.counts.Order, "%s pull (returned %d): key %s (place %d) before key %s (place %d)", a.q, a.t1, a.key, pa, b.key, pb)
		}
	}
}

// checkKey checks the batches of one key in a cycle against one another:
// none pulled while another holding one of its values (or, single-flight,
// any other) was leased, and none pulled before a nack's delay passed.
func (o *sortedOracle) checkKey(cy *sortedCycle, bs []*sortedBatch) {
	for _, a := range bs {
		for _, b := range bs {
			if a == b {
				continue
			}
			if cy.single[a.q] || shareValue(a, b) {
				o.checkOverlap(a, b)
			}
			o.checkHold(cy, a, b)
		}
	}
}

// checkOverlap checks that b, which must not be leased while a is, was
// not pulled while a's lease was shown held: from a's pull until the
// send of a settle of a that returned nil (the lease was live when it
// ran), or until the deadline an Extend of a that returned nil set
// (extendedTo; another process's clock read it, so sortedKillMargin
// applies). It counts the pairs it could judge: b's pull begun after a's
// returned and before a's hold ended (an Extend's deadline less
// sortedKillMargin), where a queue that leased b at once would be seen
// doing so; a pull begun later, or while a's was under way, shows nothing
// either way.
func (o *sortedOracle) checkOverlap(a, b *sortedBatch) {
	ext, extSent := a.extendedTo()
	end := a.heldTo
	if ext != 0 {
		end = max(end, ext-int64(sortedKillMargin))
	}
	if b.t0 <= a.t1 || b.t0 >= end {
		return
	}
	o.counts.OverlapChecks++
	switch {
	case b.t1 < a.heldTo:
		o.violate(&o.counts.Overlap, "%s batch of %s (lease %d) pulled from %d to %d while lease %d, pulled by %d, was held (settled %d)",
			b.q, b.key, b.lease, b.t0, b.t1, a.lease, a.t1, a.heldTo)
	case b.t1+int64(sortedKillMargin) < ext:
		o.violate(&o.counts.Overlap, "%s batch of %s (lease %d) pulled from %d to %d while lease %d, pulled by %d, was extended (extend sent %d, to %d)",
			b.q, b.key, b.lease, b.t0, b.t1, a.lease, a.t1, extSent, ext)
	}
}

// checkHold checks b against a's nack: b not pulled after the nack ran
// and before its delay passed, unless every nacked value went to the
// dead set (its delivery count at the MaxDeliveries of the child that
// nacked it).
func (o *sortedOracle) checkHold(cy *sortedCycle, a, b *sortedBatch) {
	if a.nackRet == 0 || a.nackDelay == 0 || b.t0 <= a.nackRet {
		return
	}
	if a.maxd > 0 && !slices.ContainsFunc(a.vals, func(v sortedVal) bool { return v.n < a.maxd }) {
		return
	}
	o.counts.HoldChecks++
	if due := a.nackSent + a.nackDelay; b.t1+int64(sortedKillMargin) < due {
		o.violate(&o.counts.Early, "%s batch of %s (lease %d) pulled by %d, %v before the delay %v of the nack of lease %d (sent %d) passed",
			b.q, b.key, b.lease, b.t1, time.Duration(due-b.t1), time.Duration(a.nackDelay), a.lease, a.nackSent)
	}
}

// checkLostEarly checks the settle of b that returned (nil or
// ErrLeaseLost): ErrLeaseLost only once the lease ran to its deadline.
// That deadline is the one an Extend that returned nil set (no earlier
// than its send plus its d), else the pull's call plus the child's
// AckTimeout (the pull ran no earlier). It judges a settle that returned
// sortedKillMargin before that deadline, with no kill of the server sent
// between the lease's last setting and the settle's return and no Extend
// of unknown outcome (or that found the lease lost) before it, and counts
// it; ErrLeaseLost there is a violation. It counts the settles that
// returned ErrLeaseLost it cannot judge: returned later (the script may
// have run past the deadline), after a kill, after such an Extend.
func (o *sortedOracle) checkLostEarly(cy *sortedCycle, b *sortedBatch) {
	ret := max(b.lostAt, b.settledAt)
	if ret == 0 {
		return
	}
	from, deadline, doubt := b.leaseBefore(len(b.extends))
	if doubt || cy.killedBetween(from, ret) || ret+int64(sortedKillMargin) >= deadline {
		if b.lostAt != 0 {
			o.counts.LostUnjudged++
		}
		return
	}
	o.counts.LostJudged++
	if from != b.t0 {
		o.counts.LostExtended++
	}
	if b.lostAt != 0 {
		o.violate(&o.counts.LostEarly, "%s batch of %s (lease %d, pulled from %d): %s returned ErrLeaseLost at %d, %v before its deadline %d (lease last set %d)",
			b.q, b.key, b.lease, b.t0, b.op, b.lostAt, time.Duration(deadline-b.lostAt), deadline, from)
	}
}

// checkExtendLostEarly checks b's Extends as checkLostEarly checks its
// settle: an Extend that returned (nil or ErrLeaseLost) sortedKillMargin
// or more before the lease's deadline as it stood (leaseBefore: the
// pull's call plus the AckTimeout, or the deadline an earlier Extend that
// returned nil set), with no kill of the server sent between the lease's
// last setting and the Extend's return and no Extend of unknown outcome
// (or that found the lease lost) before it, is judged and counted; one
// of them that returned ErrLeaseLost is a violation: a consumer that
// extends in time keeps its batch. It counts the Extends that returned
// ErrLeaseLost it cannot judge.
func (o *sortedOracle) checkExtendLostEarly(cy *sortedCycle, b *sortedBatch) {
	for i, e := range b.extends {
		if e.ret == 0 {
			continue
		}
		from, deadline, doubt := b.leaseBefore(i)
		if doubt || cy.killedBetween(from, e.ret) || e.ret+int64(sortedKillMargin) >= deadline {
			if e.outcome == 'L' {
				o.counts.ExtUnjudged++
			}
			continue
		}
		o.counts.ExtJudged++
		if from != b.t0 {
			o.counts.ExtAgain++
		}
		if e.outcome == 'L' {
			o.violate(&o.counts.ExtLostEarly, "%s batch of %s (lease %d, pulled from %d): an Extend sent %d returned ErrLeaseLost at %d, %v before its deadline %d (lease last set %d)",
				b.q, b.key, b.lease, b.t0, e.sent, e.ret, time.Duration(deadline-e.ret), deadline, from)
		}
	}
}

// killedBetween reports whether a kill of the server was sent between
// two times of the cycle.
func (cy *sortedCycle) killedBetween(from, to int64) bool {
	return slices.ContainsFunc(cy.serverKills, func(k int64) bool { return k >= from && k <= to })
}

// shareValue reports whether two batches hold a token in common.
func shareValue(a, b *sortedBatch) bool {
	for _, v := range a.vals {
		if slices.ContainsFunc(b.vals, func(w sortedVal) bool { return w.tok == v.tok }) {
			return true
		}
	}
	return false
}

// checkDeliveries checks a token's pulls against one another and its ack:
// counts rising, none after an ack returned.
func (o *sortedOracle) checkDeliveries(tok string, k *sortedTok) {
	for i, a := range k.deliveries {
		for _, b := range k.deliveries[i+1:] {
			if b.t0 < a.t0 {
				a, b = b, a
			}
			if k.requeuedBetween(a.t0, b.t1) {
				continue
			}
			if b.t0 > a.t1 && b.n <= a.n || a.n == b.n {
				o.violate(&o.counts.CountDown, "%s pulled as delivery %d (lease %d), then (begun after) as delivery %d (lease %d)",
					tok, a.n, a.lease, b.n, b.lease)
			}
		}
	}
	if k.ackedAt == 0 {
		return
	}
	for _, d := range k.deliveries {
		if d.t0 > k.ackedAt || d.n > k.ackedN && len(k.requeued) == 0 {
			o.violate(&o.counts.RedeliveredAfterAck, "%s pulled (delivery %d, lease %d, begun %d) after its delivery %d was acked (%d)",
				tok, d.n, d.lease, d.t0, k.ackedN, k.ackedAt)
		}
	}
}

// requeuedBetween reports whether the token was requeued from the dead
// set between two times.
func (k *sortedTok) requeuedBetween(a, b int64) bool {
	return slices.ContainsFunc(k.requeued, func(r int64) bool { return r > a && r < b })
}

// observed checks a token pulled, dead or drained: its publish was sent,
// and no checkpoint settled it.
func (o *sortedOracle) observed(tok string, k *sortedTok, how string) {
	k.seen = true
	if !k.sent {
		o.violate(&o.counts.Unexpected, "%s %s, never published", tok, how)
	}
	if o.closed[tok] {
		o.violate(&o.counts.Unexpected, "%s %s after a checkpoint drained the queue", tok, how)
	}
}

// held takes in a value a queue holds (dead, or drained) under key: its
// payload intact, its key the published one, no ack of it returned. It
// returns its token, "" when the payload is not one published.
func (o *sortedOracle) held(q string, payload []byte, key, how string) string {
	return o.heldWhy(q, payload, key, how, "")
}

// heldWhy is held of a dead value listed with reason, which a violation
// of its payload quotes: the listing says there why it could not read
// the value's stored record.
func (o *sortedOracle) heldWhy(q string, payload []byte, key, how, reason string) string {
	tok, intact := killToken(payload)
	if !intact {
		if reason != "" {
			o.violate(&o.counts.Payload, "%s %s value of key %s: payload %q is not one published (reason %q)", q, how, key, payload, reason)
			return ""
		}
		o.violate(&o.counts.Payload, "%s %s value of key %s: payload %q is not one published", q, how, key, payload)
		return ""
	}
	k := o.tok(tok)
	o.observed(tok, k, how)
	if k.sent && (k.key != key || k.q != q) {
		o.violate(&o.counts.WrongKey, "%s published to %s under %s, %s in %s under %s", tok, k.q, k.key, how, q, key)
	}
	if k.ackedAt != 0 {
		o.violate(&o.counts.RedeliveredAfterAck, "%s %s after an ack of it returned nil", tok, how)
	}
	return tok
}

// maybeAcked reports whether an ack of a batch holding the token
// returned nil or has an unknown outcome.
func (k *sortedTok) maybeAcked() bool { return k.ackedAt != 0 || k.acks > k.lost }

// checkpoint is called once both queues were drained and their dead sets
// purged, with what the drains and dead sets held: every publish that
// returned nil is accounted for, and the tokens known so far are settled.
func (o *sortedOracle) checkpoint(held map[string]bool) {
	for tok, k := range o.toks {
		if o.closed[tok] {
			continue
		}
		if k.done && !k.maybeAcked() && !held[tok] {
			o.violate(&o.counts.Lost, "%s (%s, key %s) published, never acked, not in the queue", tok, k.q, k.key)
		}
		o.closed[tok] = true
	}
}
