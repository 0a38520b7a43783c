package queue

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/walq/walq/index"
	"github.com/walq/walq/wal"
)

// MessageState selects the messages Browse lists.
type MessageState int

// The states a message can be in.
const (
	StateReady    MessageState = iota + 1 // deliverable now
	StateDelayed                          // waiting for its deliver-at time or a nack delay
	StateInFlight                         // leased to a consumer
	StateDead                             // in the dead-letter set
)

// String returns "ready", "delayed", "in-flight" or "dead".
func (s MessageState) String() string {
	switch s {
	case StateReady:
		return "ready"
	case StateDelayed:
		return "delayed"
	case StateInFlight:
		return "in-flight"
	case StateDead:
		return "dead"
	}
	return fmt.Sprintf("state(%d)", int(s))
}

// ParseMessageState reads a state written by MessageState.String.
func ParseMessageState(s string) (MessageState, error) {
	for st := StateReady; st <= StateDead; st++ {
		if st.String() == s {
			return st, nil
		}
	}
	return 0, fmt.Errorf("%w: unknown message state %q", ErrInvalidOptions, s)
}

// MessageInfo is a message as the queue holds it, seen without delivering
// it.
type MessageInfo struct {
	Seq        uint64            // sequence number: the LSN of its enqueue record
	ID         string            // message id
	State      MessageState      // where it stands
	EnqueuedAt time.Time         // when it was enqueued
	Due        time.Time         // delayed: when it becomes ready; in flight: the lease deadline
	Deliveries int               // deliveries so far
	Reason     string            // dead: why
	Size       int               // bytes of the log record that holds it
	Headers    map[string]string // Peek only
	Payload    []byte            // Peek only
}

// Browse returns up to limit messages in state whose sequence is at least
// from, in sequence order, without headers and payloads; the next page
// starts at the last one's Seq+1. It changes nothing. The indexes are
// copied under the queue's lock in constant time and read outside it;
// ready messages never delivered are read from the log. A compaction that
// copies those forward and cuts the log behind them meanwhile makes
// Browse copy the indexes again, so that it lists them once, where the
// copies are: such a cut never fails the call. It copies them again only
// after such a cut, as often as compactions cut the log under its read.
// Browse fails with ErrInvalidOptions for a limit that is not positive or
// an unknown state, with ErrClosed on a queue closed before the call or
// while it reads the log, and with the error of a read of the log that fails otherwise: ErrCorrupt
// for damage, another read error, or that of a record that does not
// decode.
func (q *Queue) Browse(state MessageState, from uint64, limit int) ([]MessageInfo, error) {
	if limit <= 0 || state < StateReady || state > StateDead {
		return nil, fmt.Errorf("%w: browse %s, limit %d", ErrInvalidOptions, state, limit)
	}
	for {
		out, err := q.browse(state, from, limit)
		if !errors.Is(err, errLogCut) {
			return out, err
		}
	}
}

// errLogCut is the error of a read of the never-delivered messages that a
// compaction cut out of the log after the indexes were copied. It wraps
// wal.ErrNotFound, the read's own error.
var errLogCut = fmt.Errorf("queue: the log was cut since the indexes were copied: %w", wal.ErrNotFound)

// browse is one try of Browse.
func (q *Queue) browse(state MessageState, from uint64, limit int) ([]MessageInfo, error) {
	v, err := q.browseView()
	if err != nil {
		return nil, err
	}
	out := indexed(v.snap, v.now, state, from, limit)
	if state != StateReady || v.pending == 0 {
		return out, nil
	}
	q.beforeRead()
	fresh, err := q.pendingFrom(max(from, v.cursor), v.first, limit)
	if err != nil {
		return nil, err
	}
	out = append(out, fresh...)
	slices.SortFunc(out, func(a, b MessageInfo) int { return cmpSeq(a.Seq, b.Seq) })
	return out[:min(len(out), limit)], nil
}

// browsed is what Browse copies under the lock of the state it shows.
type browsed struct {
	snap    *index.Snapshot
	now     int64  // unix ns: the queue's clock when snap was taken, that judges its delays
	cursor  uint64 // the state's cursor
	pending int64  // its never-delivered messages
	first   uint64 // the log's first LSN then
}

// browseView copies the index that Browse shows (see view), with the
// cursor, the count of never-delivered messages and the log's first LSN.
func (q *Queue) browseView() (browsed, error) {
	var v browsed
	err := q.view(func(st *state) {
		now := q.now()
		v = browsed{snap: st.table.Snapshot(), now: now, cursor: st.cursor, pending: st.pending}
		if v.pending > 0 {
			v.first = q.log.FirstLSN()
		}
	})
	return v, err
}

func cmpSeq(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// indexed returns up to limit entries of the index in state at now (unix
// ns) from sequence from on.
func indexed(snap *index.Snapshot, now int64, state MessageState, from uint64, limit int) []MessageInfo {
	var out []MessageInfo
	snap.Ascend(func(e index.Entry) bool {
		if e.Seq >= from {
			if m := entryInfo(e, now); m.State == state {
				out = append(out, m)
			}
		}
		return len(out) < limit
	})
	return out
}

// entryInfo describes the indexed message e at now (unix ns): a delay
// whose time has come shows as ready, as a dequeue at now would take it
// (index.Table.SetNow).
func entryInfo(e index.Entry, now int64) MessageInfo {
	m := MessageInfo{Seq: e.Seq, ID: e.ID, EnqueuedAt: time.Unix(0, e.EnqueuedAt),
		Deliveries: int(e.Deliveries), Reason: e.Reason, Size: int(e.Size)}
	switch e.State {
	case index.Ready:
		m.State = StateReady
	case index.Delayed:
		if e.Due <= now {
			m.State = StateReady
			break
		}
		m.State, m.Due = StateDelayed, time.Unix(0, e.Due)
	case index.Leased:
		m.State, m.Due = StateInFlight, time.Unix(0, e.Due)
	case index.Dead:
		m.State = StateDead
	}
	return m
}

// pendingFrom reads up to limit never-delivered ready messages from the log
// at from (at or after the cursor) on. first is the log's first LSN when
// the cursor was read: a log that starts later now, or is cut under the
// read, fails it with errLogCut.
func (q *Queue) pendingFrom(from, first uint64, limit int) ([]MessageInfo, error) {
	if q.log.FirstLSN() != first {
		return nil, errLogCut
	}
	r := q.log.NewReader(max(from, first))
	defer r.Close()
	var out []MessageInfo
	for len(out) < limit {
		lsn, b, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if errors.Is(err, wal.ErrNotFound) && q.log.FirstLSN() != first {
			return nil, errLogCut
		}
		if err != nil {
			return nil, closedAs(wrapCorrupt("browse log", err)) // a Close may overtake the read
		}
		if peekOp(b) != opEnqueue {
			continue
		}
		var rec record
		if err := decodeRecord(b, &rec); err != nil {
			return nil, fmt.Errorf("queue: record at LSN %d: %w", lsn, err)
		}
		if rec.Due == 0 {
			out = append(out, MessageInfo{Seq: lsn, ID: rec.ID, State: StateReady,
				EnqueuedAt: time.Unix(0, rec.At), Size: len(b)})
		}
	}
	return out, nil
}

// Peek returns the message with sequence seq, headers and payload
// included, without delivering it. ErrNotFound when no live or dead
// message has that sequence, also when it was acked or purged while Peek
// read it and compacted out of the log, and, once a failed write poisoned
// the log, when the enqueue of seq is one whose write failed and the log
// as written can be read back (Peek shows the log as written, as Stats
// counts it; when it cannot, Peek of such a seq answers the log's
// error); ErrCorrupt (or another read error) when the record that would
// tell cannot be read. A message that a
// compaction copies forward while Peek reads it is found where the copy
// is.
func (q *Queue) Peek(seq uint64) (MessageInfo, error) {
	var e index.Entry
	var indexed bool
	var cursor, last uint64
	var pending int64
	err := q.view(func(st *state) {
		e, indexed = st.table.Get(seq)
		cursor, last, pending = st.cursor, st.last, st.pending
	})
	if err != nil {
		return MessageInfo{}, err
	}
	if q.peeking != nil {
		q.peeking()
	}
	if indexed {
		return q.peekIndexed(e)
	}
	notFound := fmt.Errorf("%w: no message with sequence %d", ErrNotFound, seq)
	if seq < cursor || seq > last || pending == 0 {
		return MessageInfo{}, notFound // past the last record of the state viewed: of a poisoned log, one not written
	}
	q.beforeRead()
	rec, err := q.readRecord(seq)
	switch {
	case errors.Is(err, wal.ErrNotFound):
		if e, ok := q.indexedEntry(seq); ok {
			return q.peekIndexed(e) // copied forward out of the cursor's region, and the log cut, meanwhile
		}
		return MessageInfo{}, notFound
	case err != nil:
		return MessageInfo{}, err // damage (ErrCorrupt) or a read error: the message may be there
	case rec.Op != opEnqueue || rec.Due != 0:
		return MessageInfo{}, notFound
	}
	return MessageInfo{Seq: seq, ID: rec.ID, State: StateReady, EnqueuedAt: time.Unix(0, rec.At),
		Headers: rec.Headers, Payload: rec.Payload}, nil
}

// KeyInfo is one key of a sorted queue with values waiting to be pulled.
type KeyInfo[K SortKey] struct {
	Key    string    // the message key
	Values int       // its pending values
	First  K         // its smallest pending sort key: its place in the pull order
	Oldest time.Time // when its oldest pending value was published
}

// Keys returns up to limit keys after the key after (all keys when after is
// ""), in key order, with their pending values; the next page starts
// after the last one's Key. A limit that is not positive is refused with
// ErrInvalidOptions, as Browse refuses it. It changes nothing; the index
// is copied under the lock and read outside it.
func (s *Sorted[K]) Keys(after string, limit int) ([]KeyInfo[K], error) {
	if limit <= 0 {
		return nil, fmt.Errorf("%w: keys, limit %d", ErrInvalidOptions, limit)
	}
	var snap *index.SortedSnapshot
	if err := s.q.view(func(st *state) { snap = st.sorted.Snapshot() }); err != nil {
		return nil, err
	}
	var out []KeyInfo[K]
	var err error
	snap.Pending(func(v index.SortedValue) bool {
		if v.Key <= after && after != "" {
			return true
		}
		if n := len(out); n > 0 && out[n-1].Key == v.Key {
			k := &out[n-1]
			k.Values++
			k.Oldest = minTime(k.Oldest, time.Unix(0, v.At))
			return true
		}
		if len(out) == limit {
			return false
		}
		var first K
		if first, err = decodeSort[K](v.Sort); err != nil {
			return false
		}
		out = append(out, KeyInfo[K]{Key: v.Key, Values: 1, First: first, Oldest: time.Unix(0, v.At)})
		return true
	})
	return out, err
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// peekIndexed is Peek of the indexed message e, its state judged by the
// queue's clock now.
func (q *Queue) peekIndexed(e index.Entry) (MessageInfo, error) {
	info := entryInfo(e, q.now())
	m := &Message{Receipt: Receipt{Seq: e.Seq}}
	switch err := q.readPayload(m, e.Loc); {
	case errors.Is(err, wal.ErrNotFound) && !q.indexed(e.Seq):
		// Acked or purged, and compacted out of the log, meanwhile.
		return MessageInfo{}, fmt.Errorf("%w: no message with sequence %d", ErrNotFound, e.Seq)
	case err != nil:
		return MessageInfo{}, err
	}
	info.Headers, info.Payload = m.Headers, m.Payload
	return info, nil
}

// indexedEntry returns the message seq as the index holds it now.
func (q *Queue) indexedEntry(seq uint64) (index.Entry, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.mu.st.table.Get(seq)
}

// indexed reports whether the index holds the message seq now.
func (q *Queue) indexed(seq uint64) bool {
	_, ok := q.indexedEntry(seq)
	return ok
}
