package queue

import (
	"strings"
	"unsafe"
)

// A delivery from the cursor copies the message's payload and id out of
// the cursor's buffer under q.mu, into memory of its own: its Message
// (with the payload's room, newMessage) and its id string. Allocated
// there, they would lengthen the hold of the lock every producer and
// consumer takes. So a delivery allocates them before it takes q.mu, as
// large as the last delivery from the cursor needed (Queue.spareSize),
// and under the lock only copies into them when the message fits: its
// payload takes a room of the same size, its id has the same length. A
// message that does not fit is allocated under the lock, as before, and
// the spare is left to the collector. A look that leases nothing from the
// cursor (an empty queue, a redelivery) sets the size to none, so that a
// caller polling an empty queue, or one taking redeliveries, whose
// payload is read after the lock, allocates nothing ahead.
//
// The id's memory is its own, apart from the Message's: the queue's index
// keeps the id of a leased message (and the dedup window that of an acked
// one), which must not keep the payload alive.
type spare struct {
	m    *Message // nil when there is no spare message
	room []byte   // m's room for a payload of roomFor(len(payload)) == len(room)
	idb  []byte   // room for an id of exactly len(idb) bytes; nil when none
}

// newSpare allocates what the last delivery from the cursor needed, or
// nothing.
func (q *Queue) newSpare() spare {
	v := q.spareSize.Load()
	if v == 0 {
		return spare{}
	}
	room, idLen := int(v>>32), int(uint32(v))
	var sp spare
	if room > 0 {
		sp.m, sp.room = messageWithRoom(room)
	}
	if idLen > 0 {
		sp.idb = make([]byte, idLen)
	}
	return sp
}

// noteSpareLocked records the sizes a delivery from the cursor needed:
// payload bytes and id bytes (0, 0 for a look that leased none from the
// cursor). It writes only a change, so that consumers delivering
// messages of one size do not write the shared word each time.
func (q *Queue) noteSpareLocked(payload, id int) {
	var v uint64
	if payload > 0 || id > 0 {
		room := roomFor(payload)
		if room > maxSpare || id > maxSpare {
			room, id = 0, 0 // too large to allocate ahead of a message that may not come
		}
		v = uint64(room)<<32 | uint64(id)
	}
	if q.spareSize.Load() != v {
		q.spareSize.Store(v)
	}
}

// maxSpare is the largest payload room or id allocated ahead.
const maxSpare = 64 << 10

// message returns a Message holding a copy of p: sp's when p takes a room
// of its size, and a new one otherwise. sp's message is then spent.
func (sp *spare) message(p []byte) *Message {
	if sp.m == nil || p == nil || roomFor(len(p)) != len(sp.room) {
		return newMessage(p)
	}
	m := sp.m
	fill(m, sp.room, p)
	sp.m, sp.room = nil, nil
	return m
}

// id returns a copy of id (a view into a buffer that changes): in sp's
// room when it has id's length, and a new string otherwise. sp's id room
// is then spent.
func (sp *spare) id(id string) string {
	if len(id) == 0 {
		return ""
	}
	if len(sp.idb) != len(id) {
		return strings.Clone(id) // a copy, never the view itself
	}
	b := sp.idb
	sp.idb = nil
	copy(b, id)
	return unsafe.String(unsafe.SliceData(b), len(b))
}
