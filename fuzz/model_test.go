package fuzz_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"
)

// model is a simple in-memory ack queue with the semantics queue/doc.go
// documents, for the operation-sequence fuzz target to run against:
//
//   - never-delivered messages (pending) go in enqueue order;
//   - messages ready again (nacked, lease ran out, left leased by a crashed
//     process) and delayed messages whose time has come go first, oldest
//     enqueue first; a delay is judged by Due <= now at each question, so
//     a step back of the clock holds again a message that came due and
//     was not delivered since;
//   - a delivery leases the message until now + AckTimeout and counts;
//   - a nack, an expired lease or a crash makes it ready again, or dead
//     once it has had MaxDeliveries (a nack with a delay: delayed);
//   - a ready message that has had MaxDeliveries (left ready by an open
//     with a higher limit or none) is dead-lettered when a delivery would
//     take it, and the next one is delivered;
//   - a producer-given id refuses a duplicate while its message is live,
//     and for DedupWindow after its ack (up to and including the end); an
//     open without a window forgets every acked id as it opens;
//   - a clean close keeps leases running; a crash ends them, unless the
//     crashed process appended nothing (its log still ends with the clean
//     close of the process before, so the next open is clean too);
//   - an open may change the policy (change): the limit and the window
//     that apply are the open's own, a lease keeps the deadline it was
//     given, and a later one is given the open's AckTimeout.
type model struct {
	msgs       map[string]*modelMsg // live messages (dead included) by token
	seq        int                  // enqueues so far: the next message's order
	leases     int                  // deliveries so far: names a lease
	maxDeliver int                  // MaxDeliveries; no limit when <= 0
	ackTimeout time.Duration
	dedup      time.Duration      // DedupWindow
	acked      map[string]ackedID // producer ids of acked messages
	pinned     map[string]bool    // acked ids the open refused where either answer was right: taken for the rest of the open
	dirty      bool               // the log does not end with a clean close: a record was appended since, or none ever was
	killed     bool               // a delivery dead-lettered a message at the limit: a record that it may not have waited for
}

// ackedID is the ack of a message with a producer-given id.
type ackedID struct {
	at   int64         // ack time (unix ns)
	minW time.Duration // the smallest DedupWindow of the opens since the ack, the acking one included; 0 once the window of an open passed (lapse)
}

// modelState is where a model message stands.
type modelState uint8

const (
	modelPending modelState = iota // never delivered, not delayed
	modelReady                     // ready again
	modelDelayed                   // not before due: ready while due <= now (ready)
	modelLeased                    // leased until due
	modelDead                      // in the dead-letter set
)

// modelMsg is one live message.
type modelMsg struct {
	tok        string
	id         string // producer-given id, "" if none
	seq        int    // enqueue order
	state      modelState
	due        int64 // delayed: ready time; leased: deadline (unix ns)
	deliveries int
	lease      int    // the current lease, when leased
	reason     string // dead: the reason the docs name, or "" where they name none
}

func newModel(maxDeliver int, ackTimeout, dedup time.Duration) *model {
	return &model{msgs: make(map[string]*modelMsg), maxDeliver: maxDeliver, ackTimeout: ackTimeout,
		dedup: dedup, acked: make(map[string]ackedID), dirty: true}
}

// change applies the policy of an open. An acked id's window is the
// smallest of the opens since its ack: an open whose shorter window has
// passed may forget the id (at an enqueue, or as it replays the ack), and
// a later open with a longer window does not bring it back. An open
// without a window forgets every acked id; whether a later open sees the
// forget depends on its snapshots (see reopened and crash).
func (m *model) change(p policy, now int64) {
	m.maxDeliver, m.dedup, m.ackTimeout = p.maxDeliver, p.dedup, p.ackTimeout
	for id, a := range m.acked {
		a.minW = min(a.minW, p.dedup)
		m.acked[id] = a
	}
	m.lapse(now)
}

// lapse notes the acked ids whose window, that of the open now, has
// passed at now: the open may forget each (at an enqueue with an id, or a
// snapshot) and does not bring it back when the clock steps back within
// the window, so from then on either answer is right until the open
// refuses it (idTaken, pin). A pin ends there too: the refusal held the
// id only until its window passed.
func (m *model) lapse(now int64) {
	if m.dedup == 0 {
		return
	}
	for id, a := range m.acked {
		if now-a.at > int64(m.dedup) {
			a.minW = 0
			m.acked[id] = a
			delete(m.pinned, id)
		}
	}
}

// enqueue adds a message; due > 0 delays it.
func (m *model) enqueue(tok, id string, due int64) {
	m.seq++
	msg := &modelMsg{tok: tok, id: id, seq: m.seq}
	if due > 0 {
		msg.state, msg.due = modelDelayed, due
	}
	m.msgs[tok] = msg
}

// idTaken reports whether an enqueue with the producer id is refused at
// now (taken), and whether the docs say so for sure: a live message has
// it, or one acked within the dedup window of every open since its ack,
// the one open now included (taken, sure); the window open now has
// passed, or is 0 (free, sure). An id acked within the window open now
// but not within that of an open between (a shorter window, or none that
// crashed) may have been forgotten: either outcome is right, until the
// open refuses it once (pin): the open does not forget it within its own
// window.
func (m *model) idTaken(id string, now int64) (taken, sure bool) {
	for _, msg := range m.msgs {
		if msg.id == id {
			return true, true
		}
	}
	a, ok := m.acked[id]
	switch {
	case !ok || m.dedup == 0 || now-a.at > int64(m.dedup):
		return false, true
	case a.minW > 0 && now-a.at <= int64(a.minW):
		return true, true
	}
	return m.pinned[id], m.pinned[id]
}

// pin notes that the open refused the acked id where either answer was
// right.
func (m *model) pin(id string) {
	if m.pinned == nil {
		m.pinned = make(map[string]bool)
	}
	m.pinned[id] = true
}

// reopened notes a clean close of an open whose dedup window was window,
// and the next open. An open without a window holds no acked id (it
// forgot them as it opened, and its acks forget theirs), so its close
// snapshot keeps none: the next open refuses none of them.
func (m *model) reopened(window time.Duration) {
	m.pinned = nil
	if window == 0 {
		clear(m.acked)
	}
}

// ack removes msg, acked at now; its id, if any, enters the dedup window.
func (m *model) ack(msg *modelMsg, now int64) {
	delete(m.msgs, msg.tok)
	if msg.id != "" {
		m.acked[msg.id] = ackedID{at: now, minW: m.dedup}
	}
}

// ready reports whether msg is ready again at now: nacked, its lease ran
// out, or delayed with its time come by the clock now.
func (msg *modelMsg) ready(now int64) bool {
	return msg.state == modelReady || msg.state == modelDelayed && msg.due <= now
}

// next returns the message the next delivery gets, or nil. A ready
// message that has had MaxDeliveries goes to the dead set on the way, as
// the delivery that would take it does, with a record of its own.
func (m *model) next(now int64) *modelMsg {
	for {
		best := m.first(now)
		if best == nil || !m.pastLimit(best.deliveries) {
			return best
		}
		best.state, m.dirty, m.killed = modelDead, true, true // a record dead-letters it
		best.reason = fmt.Sprintf("%d deliveries, limit %d; not delivered again", best.deliveries, m.maxDeliver)
	}
}

// pastLimit reports whether a message delivered n times has had every
// delivery MaxDeliveries allows.
func (m *model) pastLimit(n int) bool { return m.maxDeliver > 0 && n >= m.maxDeliver }

// first returns the message first in the delivery order, or nil.
func (m *model) first(now int64) *modelMsg {
	var best *modelMsg
	for _, msg := range m.msgs {
		if !msg.ready(now) && msg.state != modelPending {
			continue
		}
		if best == nil || less(msg, best, now) {
			best = msg
		}
	}
	return best
}

// oldestPending returns the never-delivered message enqueued first, or nil.
func (m *model) oldestPending() *modelMsg {
	var best *modelMsg
	for _, msg := range m.msgs {
		if msg.state == modelPending && (best == nil || msg.seq < best.seq) {
			best = msg
		}
	}
	return best
}

// less orders deliveries at now: ready before pending, then by enqueue
// order.
func less(a, b *modelMsg, now int64) bool {
	if a.ready(now) != b.ready(now) {
		return a.ready(now)
	}
	return a.seq < b.seq
}

// deliver leases msg and returns the lease.
func (m *model) deliver(msg *modelMsg, now int64) int {
	m.leases++
	msg.state, msg.due, msg.lease = modelLeased, now+int64(m.ackTimeout), m.leases
	msg.deliveries++
	return m.leases
}

// owns reports whether the delivery (tok, lease) still owns its message.
func (m *model) owns(tok string, lease int) (*modelMsg, bool) {
	msg, ok := m.msgs[tok]
	return msg, ok && msg.state == modelLeased && msg.lease == lease
}

// endLease makes a leased message ready (or delayed until due > 0), or
// dead once it has had MaxDeliveries.
func (m *model) endLease(msg *modelMsg, due int64) {
	msg.reason = ""
	switch {
	case m.pastLimit(msg.deliveries):
		msg.state, msg.due = modelDead, 0
	case due > 0:
		msg.state, msg.due = modelDelayed, due
	default:
		msg.state, msg.due = modelReady, 0
	}
}

// expire ends every lease whose deadline is at or before now.
func (m *model) expire(now int64) {
	for _, msg := range m.msgs {
		if msg.state == modelLeased && msg.due <= now {
			m.endLease(msg, 0)
		}
	}
}

// crash ends every lease, the process that held them died, unless the
// process appended nothing since a clean open. Ending leases appends. The
// next open forgets its pins: it rebuilds the ids from the newest
// snapshot and the log.
func (m *model) crash() {
	m.pinned = nil
	if !m.dirty {
		return
	}
	for _, msg := range m.msgs {
		if msg.state == modelLeased {
			m.endLease(msg, 0)
		}
	}
}

// requeueDead makes every dead message ready with its count reset.
func (m *model) requeueDead() int {
	n := 0
	for _, msg := range m.msgs {
		if msg.state == modelDead {
			msg.state, msg.deliveries = modelReady, 0
			n++
		}
	}
	return n
}

// counts returns ready (pending included), delayed, leased and dead at now.
func (m *model) counts(now int64) string {
	var c [5]int
	for _, msg := range m.msgs {
		st := msg.state
		if msg.ready(now) {
			st = modelReady
		}
		c[st]++
	}
	return fmt.Sprintf("ready=%d delayed=%d inflight=%d dead=%d", c[modelPending]+c[modelReady], c[modelDelayed], c[modelLeased], c[modelDead])
}

// deadTokens returns the dead messages' tokens in enqueue order.
func (m *model) deadTokens() []string {
	var dead []*modelMsg
	for _, msg := range m.msgs {
		if msg.state == modelDead {
			dead = append(dead, msg)
		}
	}
	sort.Slice(dead, func(i, j int) bool { return dead[i].seq < dead[j].seq })
	out := make([]string, len(dead))
	for i, msg := range dead {
		out[i] = msg.tok
	}
	return out
}

// crashImage copies dir as a kill -9 at one instant leaves it. The
// housekeeper may be compacting while the files are copied (a snapshot
// renamed in, front segments removed, copies appended), and a copy taken
// across such a change holds files of two moments that no crash leaves, so
// the copy is taken again until no file changed while it was made.
func crashImage(t testing.TB, dir string) (string, error) {
	for try := 0; ; try++ {
		before, err := listFiles(dir)
		if err != nil {
			return "", err
		}
		img := scratchDir(t)
		err = copyDir(dir, img)
		if err != nil && !errors.Is(err, os.ErrNotExist) { // removed while walked: a change
			return "", err
		}
		after, lerr := listFiles(dir)
		if lerr != nil {
			return "", lerr
		}
		if err == nil && unchangedFiles(before, after) {
			return img, nil
		}
		if try == 1000 {
			return "", fmt.Errorf("%s kept changing while it was copied", dir)
		}
		os.RemoveAll(img)
		time.Sleep(time.Millisecond)
	}
}

// listFiles returns the files under dir by relative path.
func listFiles(dir string) (map[string]os.FileInfo, error) {
	out := make(map[string]os.FileInfo)
	err := filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
		if errors.Is(err, os.ErrNotExist) {
			return nil // removed while walked: missing from one of the listings
		}
		if err != nil || info.IsDir() {
			return err
		}
		out[path] = info
		return nil
	})
	return out, err
}

// unchangedFiles reports whether two listings name the same files, each the
// same file (not one renamed over it) of the same size and time.
func unchangedFiles(a, b map[string]os.FileInfo) bool {
	if len(a) != len(b) {
		return false
	}
	for path, fa := range a {
		fb, ok := b[path]
		if !ok || !os.SameFile(fa, fb) || fa.Size() != fb.Size() || !fa.ModTime().Equal(fb.ModTime()) {
			return false
		}
	}
	return true
}
