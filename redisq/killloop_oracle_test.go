package redisq_test

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
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
//     earlier attempt was shown to enqueue (returned nil, or seen since).
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
	seen           bool // delivered, dead or drained
}

type killDelivery struct {
	id     string
	n      int
	t0, t1 int64
}

// killCounts are the kill loop's figures.
type killCounts struct {
	Cycles, ServerKills, ChildKills                       int
	Sent, Enqueued, Unknown, DupRefused                   int
	Delivered, Acked, AckLost, AckUnknown, Requeued, Dead int
	Drained                                               int
	Lost, Unexpected, RedeliveredAfterAck, Payload        int
	CountDown, DupUnfounded                               int
}

func (c killCounts) String() string {
	return fmt.Sprintf("cycles=%d server-kills=%d child-kills=%d sent=%d enqueued=%d unknown=%d dup-refused=%d "+
		"delivered=%d acked=%d ack-lease-lost=%d ack-unknown=%d dead-seen=%d requeued-from-dead=%d drained=%d | "+
		"lost=%d unexpected=%d redelivered-after-ack=%d payload=%d count-down=%d dup-unfounded=%d",
		c.Cycles, c.ServerKills, c.ChildKills, c.Sent, c.Enqueued, c.Unknown, c.DupRefused,
		c.Delivered, c.Acked, c.AckLost, c.AckUnknown, c.Dead, c.Requeued, c.Drained,
		c.Lost, c.Unexpected, c.RedeliveredAfterAck, c.Payload, c.CountDown, c.DupUnfounded)
}

func (c killCounts) violations() int {
	return c.Lost + c.Unexpected + c.RedeliveredAfterAck + c.Payload + c.CountDown + c.DupUnfounded
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

// readJournals takes in the journals of a cycle's children, all dead: the
// enqueues sent first, so that a delivery read from one journal finds the
// enqueue another one sent. A line a kill cut short (no newline) is
// dropped.
func (o *killOracle) readJournals(paths []string) error {
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
	for _, f := range rest {
		if err := o.line(f); err != nil {
			return fmt.Errorf("%q: %w", f, err)
		}
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
	d := killDelivery{id: f[0], n: int(n[0]), t0: n[1], t1: n[2]}
	o.observed(tok, k, "delivered")
	o.checkID(tok, k, d.id)
	for _, e := range k.deliveries {
		o.checkOrder(tok, k, e, d)
	}
	k.deliveries = append(k.deliveries, d)
	o.checkAcked(tok, k)
	return nil
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
