package fuzz_test

import (
	"fmt"
	"sort"
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
//   - a producer-given id refuses a duplicate while its message is live;
//   - a clean close keeps leases running; a crash ends them, unless the
//     crashed process appended nothing (its log still ends with the clean
//     close of the process before, so the next open is clean too).
type model struct {
	msgs       map[string]*modelMsg // live messages (dead included) by token
	seq        int                  // enqueues so far: the next message's order
	leases     int                  // deliveries so far: names a lease
	maxDeliver int                  // MaxDeliveries (> 0)
	ackTimeout time.Duration
	dirty      bool // the log does not end with a clean close: a record was appended since, or none ever was
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

func newModel(maxDeliver int, ackTimeout time.Duration) *model {
	return &model{msgs: make(map[string]*modelMsg), maxDeliver: maxDeliver, ackTimeout: ackTimeout, dirty: true}
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

// idLive reports whether a live message has the producer id.
func (m *model) idLive(id string) bool {
	for _, msg := range m.msgs {
		if msg.id == id {
			return true
		}
	}
	return false
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
	case msg.deliveries >= m.maxDeliver:
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
