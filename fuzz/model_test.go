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
//     enqueue first;
//   - a delivery leases the message until now + AckTimeout and counts;
//   - a nack, an expired lease or a crash makes it ready again, or dead
//     once it has had MaxDeliveries (a nack with a delay: delayed);
//   - a producer-given id refuses a duplicate while its message is live,
//     and for DedupWindow after its ack (up to and including the end);
//   - a clean close keeps leases running; a crash ends them, unless the
//     crashed process appended nothing (its log still ends with the clean
//     close of the process before, so the next open is clean too).
type model struct {
	msgs       map[string]*modelMsg // live messages (dead included) by token
	seq        int                  // enqueues so far: the next message's order
	leases     int                  // deliveries so far: names a lease
	maxDeliver int                  // MaxDeliveries; no limit when <= 0
	ackTimeout time.Duration
	dedup      time.Duration    // DedupWindow
	acked      map[string]int64 // producer ids of acked messages: ack time (unix ns)
	dirty      bool             // the log does not end with a clean close: a record was appended since, or none ever was
}

// modelState is where a model message stands.
type modelState uint8

const (
	modelPending modelState = iota // never delivered, not delayed
	modelReady                     // ready again, or a delay that passed
	modelDelayed                   // not before due
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
	lease      int // the current lease, when leased
}

func newModel(maxDeliver int, ackTimeout, dedup time.Duration) *model {
	return &model{msgs: make(map[string]*modelMsg), maxDeliver: maxDeliver, ackTimeout: ackTimeout,
		dedup: dedup, acked: make(map[string]int64), dirty: true}
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
// now: a live message has it, or one acked within the dedup window.
func (m *model) idTaken(id string, now int64) bool {
	for _, msg := range m.msgs {
		if msg.id == id {
			return true
		}
	}
	at, ok := m.acked[id]
	return ok && m.dedup > 0 && now-at <= int64(m.dedup)
}

// ack removes msg, acked at now; its id, if any, enters the dedup window.
func (m *model) ack(msg *modelMsg, now int64) {
	delete(m.msgs, msg.tok)
	if msg.id != "" {
		m.acked[msg.id] = now
	}
}

// promote makes delayed messages whose time has come ready.
func (m *model) promote(now int64) {
	for _, msg := range m.msgs {
		if msg.state == modelDelayed && msg.due <= now {
			msg.state, msg.due = modelReady, 0
		}
	}
}

// next returns the message the next delivery gets, or nil.
func (m *model) next(now int64) *modelMsg {
	m.promote(now)
	var best *modelMsg
	for _, msg := range m.msgs {
		if msg.state != modelReady && msg.state != modelPending {
			continue
		}
		if best == nil || less(msg, best) {
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

// less orders deliveries: ready before pending, then by enqueue order.
func less(a, b *modelMsg) bool {
	if (a.state == modelReady) != (b.state == modelReady) {
		return a.state == modelReady
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
	switch {
	case m.maxDeliver > 0 && msg.deliveries >= m.maxDeliver:
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
// process appended nothing since a clean open. Ending leases appends.
func (m *model) crash() {
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
	m.promote(now)
	var c [5]int
	for _, msg := range m.msgs {
		c[msg.state]++
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
