package queue

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/walq/walq/index"
)

// Message is one delivery of a message to a consumer. The consumer owns it
// until it acks, nacks or dead-letters it, or until its lease runs out.
type Message struct {
	ID          string            // producer-given or generated; unique among live messages
	Payload     []byte            // the message body
	Headers     map[string]string // producer-given; nil when none
	EnqueuedAt  time.Time         // when it was enqueued
	DeliveredAt time.Time         // when this delivery began
	Deliveries  int               // deliveries so far, this one included
	Receipt     Receipt           // names this delivery

	q *Queue // the queue it came from

	s Settler // another engine's settler (NewMessage); used when q is nil
}

// Ack removes the message for good. It fails with ErrLeaseLost if the
// lease ran out and the message went back to the queue.
func (m *Message) Ack() error {
	if m.q == nil {
		return m.s.Ack(m.Receipt)
	}
	return m.q.Ack(m.Receipt)
}

// Nack gives the message back: ready again after delay (at once when delay
// is 0), or dead once it has had MaxDeliveries.
func (m *Message) Nack(delay time.Duration) error {
	if m.q == nil {
		return m.s.Nack(m.Receipt, delay)
	}
	return m.q.Nack(m.Receipt, delay)
}

// Extend sets the lease to run out d from now, sooner than before when d
// is shorter than what is left; a d that is not positive is refused
// with ErrInvalidOptions.
func (m *Message) Extend(d time.Duration) error {
	if m.q == nil {
		return m.s.Extend(m.Receipt, d)
	}
	return m.q.Extend(m.Receipt, d)
}

// DeadLetter moves the message to the dead-letter set with a reason.
func (m *Message) DeadLetter(reason string) error {
	if m.q == nil {
		return m.s.DeadLetter(m.Receipt, reason)
	}
	return m.q.DeadLetter(m.Receipt, reason)
}

// Receipt names one delivery of one message. It stays valid across a clean
// Close and Open, so another process can ack it; it is lost when the lease
// runs out or the process that leased it crashes.
//
// Seq and Lease are LSNs of records that a delivery does not wait to see
// fsynced (a consumer may get a message whose enqueue is written but not
// yet durable, and the lease record is fsynced with the next commit). A
// power loss can take both while the receipt lives on in another process,
// and the next run gives the same LSNs to another message and its
// delivery. At tells them apart: a receipt whose At is not the delivery's
// is refused (ErrLeaseLost), never settles a message its holder did not
// get.
type Receipt struct {
	Seq   uint64 // the message's sequence number
	Lease uint64 // the delivery's lease number
	At    int64  // unix ns of the delivery (Message.DeliveredAt); 0: not checked
}

// String returns the receipt as "seq.lease.at" ("seq.lease" when At is 0),
// the form ParseReceipt reads.
func (r Receipt) String() string {
	if r.At == 0 {
		return fmt.Sprintf("%d.%d", r.Seq, r.Lease)
	}
	return fmt.Sprintf("%d.%d.%d", r.Seq, r.Lease, r.At)
}

// ParseReceipt reads a receipt written by Receipt.String.
func ParseReceipt(s string) (Receipt, error) {
	parts := strings.Split(s, ".")
	var r Receipt
	var err error
	if len(parts) == 2 || len(parts) == 3 {
		r.Seq, err = strconv.ParseUint(parts[0], 10, 64)
	}
	if err == nil && len(parts) >= 2 {
		r.Lease, err = strconv.ParseUint(parts[1], 10, 64)
	}
	if err == nil && len(parts) == 3 {
		if r.At, err = strconv.ParseInt(parts[2], 10, 64); r.At == 0 {
			err = errors.New("zero delivery time")
		}
	}
	if err != nil || r.Seq == 0 || r.Lease == 0 {
		return Receipt{}, fmt.Errorf("%w: receipt %q is not seq.lease or seq.lease.at", ErrInvalidOptions, s)
	}
	return r, nil
}

// leasedBy is leased for the delivery the receipt r names: a receipt with
// a delivery time must name the delivery the lease now belongs to.
func (s *state) leasedBy(r Receipt, now int64) (index.Entry, error) {
	e, err := s.leased(r.Seq, r.Lease, now)
	if err == nil && r.At != 0 && e.DeliveredAt != r.At {
		return index.Entry{}, fmt.Errorf("%w: receipt %s: the delivery leased as %d was made at %d (a crash lost the one the receipt names)",
			ErrLeaseLost, r, r.Lease, e.DeliveredAt)
	}
	return e, err
}

// AckAsync acks the message without waiting for the commit; see
// Queue.SettleAsync. Only the embedded queue settles asynchronously: a
// message of another engine fails with errors.ErrUnsupported (use Ack).
func (m *Message) AckAsync() (*Pending, error) {
	if m.q == nil {
		return nil, fmt.Errorf("queue: AckAsync: %w by this engine", errors.ErrUnsupported)
	}
	return m.q.AckAsync(m.Receipt)
}

// withPayload is a Message and the room for a payload of up to len(B)
// bytes, allocated together: a delivery's Message and its payload cost one
// allocation instead of two. B is a byte array; each size makes the whole
// a size class of the allocator (see messageSize).
type withPayload[B any] struct {
	m Message
	b B
}

// newMessage returns a new Message whose Payload is a copy of p (nil when
// p is nil, empty when p is empty). A payload up to maxRoom bytes (1888 on 64-bit) shares the
// Message's allocation; it is never appended to in place (its capacity
// is its length), so it never writes past its room.
func newMessage(p []byte) *Message {
	switch n := uintptr(len(p)); {
	case p == nil:
		return &Message{}
	case n == 0:
		return &Message{Payload: []byte{}}
	case n <= 192-messageSize:
		return carry(new(withPayload[[192 - messageSize]byte]), p)
	case n <= 256-messageSize:
		return carry(new(withPayload[[256 - messageSize]byte]), p)
	case n <= 512-messageSize:
		return carry(new(withPayload[[512 - messageSize]byte]), p)
	case n <= 1024-messageSize-mallocHeader:
		return carry(new(withPayload[[1024 - messageSize - mallocHeader]byte]), p)
	case n <= 1152-messageSize-mallocHeader:
		return carry(new(withPayload[[1152 - messageSize - mallocHeader]byte]), p)
	case n <= 1280-messageSize-mallocHeader:
		return carry(new(withPayload[[1280 - messageSize - mallocHeader]byte]), p)
	case n <= 1536-messageSize-mallocHeader:
		return carry(new(withPayload[[1536 - messageSize - mallocHeader]byte]), p)
	case n <= 1792-messageSize-mallocHeader:
		return carry(new(withPayload[[1792 - messageSize - mallocHeader]byte]), p)
	case n <= maxRoom:
		return carry(new(withPayload[[maxRoom]byte]), p)
	}
	b := make([]byte, len(p))
	copy(b, p)
	return &Message{Payload: b}
}

// messageSize is the size of a Message; maxRoom the largest payload that
// shares its allocation. Each room makes the whole an allocator size class
// (192, 256, 512, 1024, 1152, 1280, 1536, 1792 or 2048 bytes; above 512 bytes
// with the allocator's header, mallocHeader, which an object holding
// pointers carries there): the rooms past 1 KiB are at most a quarter of
// a kilobyte apart, so a payload of 1 to 2 KiB wastes at most 256 bytes
// and saves the allocation of a separate payload.
const (
	messageSize  = unsafe.Sizeof(Message{})
	mallocHeader = 8 // the allocator's header before an object above 512 bytes that holds pointers
	maxRoom      = 2048 - messageSize - mallocHeader
)

// carry copies p into w's room and returns w's Message holding it.
func carry[B any](w *withPayload[B], p []byte) *Message {
	room := unsafe.Slice((*byte)(unsafe.Pointer(&w.b)), unsafe.Sizeof(w.b))
	w.m.Payload = room[:copy(room, p):len(p)]
	return &w.m
}
