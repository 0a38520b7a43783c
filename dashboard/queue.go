package dashboard

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/walq/walq/internal/damage"
	"github.com/walq/walq/queue"
)

// ForQueue returns the Source of an ack queue. It implements DeadActions.
// A dead letter's Ref is "SEQ@ID" (SEQ~HEX, the id in hex, for an id that
// is not UTF-8), which Message, RequeueDead and
// PurgeDead check: a Ref whose seq now holds another message, as after a
// power loss that gave the seq to a new message, is not found, and the
// actions refuse a bare seq. The Ref of a message in another state is its
// seq alone.
func ForQueue(q *queue.Queue) Source { return queueSource{q} }

type queueSource struct{ q *queue.Queue }

func (s queueSource) Stats(context.Context) (Stats, error) {
	return fromStats("queue", s.q.Stats())
}

// fromStats converts a walq queue's Stats; a sorted queue's values take
// the places of messages. A closed queue's are refused (queue.ErrClosed):
// they no longer tell what the queue holds. The oldest message's age is
// measured from st.At, the queue's clock, or, from an engine that leaves
// At zero, the system's. CountsErr is carried as CountsError, OldestErr
// as OldestError, each with whether it is damage (CountsCorrupt,
// OldestCorrupt).
func fromStats(kind string, st queue.Stats) (Stats, error) {
	if st.Closed {
		return Stats{}, fmt.Errorf("dashboard: stats: %w", queue.ErrClosed)
	}
	now := st.At
	if now.IsZero() {
		now = time.Now()
	}
	out := Stats{Kind: kind, Ready: st.Ready, InFlight: st.InFlight, Delayed: st.Delayed, Dead: st.Dead,
		Enqueued: st.Enqueued, Delivered: st.Delivered, Acked: st.Acked, Nacked: st.Nacked,
		Expired: st.Expired, DeadLettered: st.DeadLettered, LogBytes: st.LogBytes, LiveBytes: st.LiveBytes,
		BackgroundErrorAt: st.BackgroundErrAt, BackgroundErrors: st.BackgroundErrors}
	if kind == "sorted" {
		out.Ready, out.InFlight, out.Dead = int64(st.SortedPending), int64(st.SortedLeased), int64(st.SortedDead)
		out.Keys = int64(st.SortedKeys)
		out.Enqueued, out.Delivered, out.Acked = st.Published, st.Pulled, st.BatchesAcked
	}
	if st.BackgroundErr != nil {
		out.BackgroundError = st.BackgroundErr.Error()
	}
	if st.CountsErr != nil {
		out.CountsError, out.CountsCorrupt = st.CountsErr.Error(), damage.Is(st.CountsErr)
	}
	if st.OldestErr != nil {
		out.OldestError, out.OldestCorrupt = st.OldestErr.Error(), damage.Is(st.OldestErr)
	}
	if !st.OldestEnqueuedAt.IsZero() {
		out.OldestAgeSeconds = max(0, now.Sub(st.OldestEnqueuedAt).Seconds())
	}
	return out, nil
}

func (s queueSource) Messages(_ context.Context, state, after string, limit int) (Page, error) {
	st, err := queue.ParseMessageState(state)
	if err != nil {
		return Page{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	from, err := pageStart(after)
	if err != nil {
		return Page{}, err
	}
	ms, err := s.q.Browse(st, from, limit+1)
	if err != nil {
		return Page{}, err
	}
	return pageOf(ms, limit, fromInfo), nil
}

func (s queueSource) Message(_ context.Context, ref string) (Message, error) {
	r, err := parseRef(ref, false)
	if err != nil {
		return Message{}, err
	}
	m, err := s.q.Peek(r.seq)
	if errors.Is(err, queue.ErrCorrupt) {
		return s.damagedDead(r, err)
	}
	if errors.Is(err, queue.ErrNotFound) {
		return Message{}, fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	if err != nil {
		return Message{}, err
	}
	if err := r.check(m.Seq, m.ID); err != nil {
		return Message{}, err
	}
	out := fromInfo(m)
	out.Headers, out.Payload = m.Headers, m.Payload
	return out, nil
}

// damagedDead returns the dead letter r names, whose payload Peek could
// not read (peekErr), as DeadLetters lists it: without payload, its
// reason telling why. A message of another state returns peekErr.
func (s queueSource) damagedDead(r ref, peekErr error) (Message, error) {
	ds, err := s.q.DeadLetters(r.seq, 1)
	if err != nil {
		return Message{}, err
	}
	if len(ds) == 0 || ds[0].Seq != r.seq {
		return Message{}, peekErr
	}
	d := ds[0]
	if err := r.check(d.Seq, d.ID); err != nil {
		return Message{}, err
	}
	return Message{Ref: deadLetterRef(d.Seq, d.ID), ID: d.ID, State: queue.StateDead.String(),
		EnqueuedAt: d.EnqueuedAt, Deliveries: d.Deliveries, Reason: d.Reason}, nil
}

func (s queueSource) RequeueDead(ctx context.Context, ref string) error {
	return s.deadAction(ctx, ref, refusing(s.q.RequeueDead))
}

func (s queueSource) PurgeDead(ctx context.Context, ref string) error {
	return s.deadAction(ctx, ref, s.q.PurgeDead)
}

// deadAction runs act on the id of the dead letter ref names: only a
// SEQ@ID reference is taken, and only while that seq holds that id.
func (s queueSource) deadAction(ctx context.Context, ref string, act func(id string) error) error {
	if err := mustName(ref); err != nil {
		return err
	}
	m, err := s.Message(ctx, ref)
	if err != nil {
		return err
	}
	if m.State != queue.StateDead.String() {
		return fmt.Errorf("%w: message %s is %s, not dead", ErrNotFound, ref, m.State)
	}
	if err := act(m.ID); err != nil {
		return actionError(err)
	}
	return nil
}

// actionError is err, the error of a queue's dead-letter action, wrapped
// in the sentinel the API answers it with: ErrNotFound for
// queue.ErrNotFound.
func actionError(err error) error {
	if errors.Is(err, queue.ErrNotFound) {
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	return err
}

// refusing returns requeue, a queue's requeue of a dead letter or value,
// with the error of its refusal of one it cannot read (queue.ErrCorrupt)
// wrapped in ErrRefused. Only a requeue refuses so: any other action that
// fails with queue.ErrCorrupt is the server's failure.
func refusing[T any](requeue func(T) error) func(T) error {
	return func(v T) error {
		err := requeue(v)
		if errors.Is(err, queue.ErrCorrupt) {
			return fmt.Errorf("%w: %w", ErrRefused, err)
		}
		return err
	}
}

// fromInfo converts a message; a dead letter's Ref is SEQ@ID.
func fromInfo(m queue.MessageInfo) Message {
	ref := strconv.FormatUint(m.Seq, 10)
	if m.State == queue.StateDead {
		ref = deadLetterRef(m.Seq, m.ID)
	}
	return Message{Ref: ref, ID: m.ID, State: m.State.String(),
		EnqueuedAt: m.EnqueuedAt, Due: m.Due, Deliveries: m.Deliveries, Reason: m.Reason, Size: m.Size}
}

// deadLetterRef is an ack queue's dead letter's reference: its seq and
// its id, which names it across a crash that gave the seq to another
// message. An id that is not UTF-8 is written in hex after a "~" instead
// of an "@": JSON, which carries the reference to the page and back,
// would replace its bad bytes.
func deadLetterRef(seq uint64, id string) string {
	if !utf8.ValidString(id) {
		return strconv.FormatUint(seq, 10) + "~" + hex.EncodeToString([]byte(id))
	}
	return strconv.FormatUint(seq, 10) + "@" + id
}

// pageStart returns the first sequence number of the page after the
// position after ("" for the first page).
func pageStart(after string) (uint64, error) {
	from, err := parseRef(after, true)
	if err != nil || after == "" {
		return from.seq, err
	}
	return from.seq + 1, nil
}

// pageOf makes a page of up to limit items; items holds one more than
// limit when there is a next page.
func pageOf[T any](items []T, limit int, conv func(T) Message) Page {
	p := Page{Messages: make([]Message, 0, min(len(items), limit))}
	for i, it := range items {
		if i == limit {
			p.Next = p.Messages[i-1].Ref
			break
		}
		p.Messages = append(p.Messages, conv(it))
	}
	return p
}

// ref is a message reference of an ack queue: its seq and, when named,
// the id the message with that seq must have; text is the reference as
// given.
type ref struct {
	seq   uint64
	id    string
	named bool
	text  string
}

// parseRef reads a message reference: "SEQ@ID" or "SEQ~HEX" (a dead
// letter's, deadLetterRef), or a bare sequence number (a message of
// another state's).
func parseRef(text string, empty bool) (ref, error) {
	if text == "" && empty {
		return ref{}, nil
	}
	r, ok := splitRef(text)
	if !ok {
		return ref{}, fmt.Errorf("%w: message reference %q is neither SEQ nor SEQ@ID (SEQ~HEX)", ErrInvalid, text)
	}
	return r, nil
}

// splitRef splits a reference at its first "@" or "~" (a seq is digits
// only), decoding the hex id after a "~"; false when it is malformed.
func splitRef(text string) (ref, bool) {
	i := strings.IndexAny(text, "@~")
	if i < 0 {
		i = len(text)
	}
	seq, err := strconv.ParseUint(text[:i], 10, 64)
	if err != nil || seq == 0 {
		return ref{}, false
	}
	if i == len(text) {
		return ref{seq: seq, text: text}, true
	}
	id := text[i+1:]
	if text[i] == '~' {
		b, err := hex.DecodeString(id)
		if err != nil {
			return ref{}, false
		}
		id = string(b)
	}
	return ref{seq: seq, id: id, named: true, text: text}, id != ""
}

// check returns an error wrapping ErrNotFound unless the message at seq,
// whose id is id, is the one r names.
func (r ref) check(seq uint64, id string) error {
	if seq != r.seq {
		return fmt.Errorf("%w: no message %d", ErrNotFound, r.seq)
	}
	if r.named && id != r.id {
		return fmt.Errorf("%w: no message %s: the message %d is %s (a crash lost the one the reference was read for)",
			ErrNotFound, r.text, seq, idText(id))
	}
	return nil
}

// idText is id as a reference writes it after the seq: itself, or, when
// it is not UTF-8, "~" and its bytes in hex (see deadLetterRef).
func idText(id string) string {
	if !utf8.ValidString(id) {
		return "~" + hex.EncodeToString([]byte(id))
	}
	return id
}

// mustName refuses a dead-letter action on a bare seq: a seq read before
// a crash may name another message since, the id does not.
func mustName(text string) error {
	if r, err := parseRef(text, false); err != nil || r.named {
		return err
	}
	return fmt.Errorf("%w: dead letter reference %q is not SEQ@ID or SEQ~HEX (as the dead list gives it)", ErrInvalid, text)
}

// ForSorted returns the Source of a sorted queue, or of a windowed one
// (ForSorted(w.Sorted)). It implements KeySource and DeadActions: pending
// values are seen by key, and the message lists hold the dead values (Ref
// is "seq@published-unix-ns"; ID is "key/seq"). A Ref whose seq now holds
// a value published at another time, as after a power loss that gave the
// seq to a new publish, is not found, never requeued or purged; a bare
// seq is viewed, and the actions refuse it unless the dead value's
// publish time cannot be read (its record is damaged, as the Redis
// engine's can be: see ForSortedQueue): the list names such a value by
// its seq alone, and the actions take that.
func ForSorted[K queue.SortKey](s *queue.Sorted[K]) Source {
	return sortedSource[K]{deadSetSource: deadSetSource[K]{s}, s: s}
}

// ForSortedQueue returns the Source of any engine's sorted queue, or of a
// windowed one (ForSortedQueue(w.Sorted)), through the method set every
// engine offers (queue.SortedQueue): the Redis backend's, or the embedded
// queue seen through the interface. It implements DeadActions: it shows
// the figures and the dead values, with requeue and purge, named and
// checked as ForSorted names and checks them; it lists no keys, which the
// shared method set cannot read (ForSorted can, for the embedded queue).
func ForSortedQueue[K queue.SortKey](s queue.SortedQueue[K]) Source { return deadSetSource[K]{s} }

// deadSetSource is the Source of a sorted queue's figures and dead
// values; sortedSource adds its keys.
type deadSetSource[K queue.SortKey] struct{ s queue.SortedQueue[K] }

// sortedSource is ForSorted's Source: deadSetSource and the keys.
type sortedSource[K queue.SortKey] struct {
	deadSetSource[K]
	s *queue.Sorted[K]
}

// Stats reads the figures, with the error of an engine that reports one
// (redisq's StatsContext: its Stats alone would return zeros).
func (s deadSetSource[K]) Stats(ctx context.Context) (Stats, error) {
	r, ok := s.s.(statsReader)
	if !ok {
		return fromStats("sorted", s.s.Stats())
	}
	st, err := r.StatsContext(ctx)
	if err != nil {
		return Stats{}, fmt.Errorf("dashboard: stats: %w", err)
	}
	return fromStats("sorted", st)
}

func (s deadSetSource[K]) Messages(_ context.Context, state, after string, limit int) (Page, error) {
	st, err := queue.ParseMessageState(state)
	if err != nil {
		return Page{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if st != queue.StateDead {
		return Page{Messages: []Message{}}, nil
	}
	from := uint64(0)
	if after != "" {
		r, err := parseDeadRef(after)
		if err != nil {
			return Page{}, err
		}
		from = r.seq + 1
	}
	ds, err := s.s.DeadValues(from, limit+1)
	if err != nil {
		return Page{}, err
	}
	return pageOf(ds, limit, fromDeadValue), nil
}

func (s deadSetSource[K]) Message(_ context.Context, ref string) (Message, error) {
	r, err := parseDeadRef(ref)
	if err != nil {
		return Message{}, err
	}
	ds, err := s.s.DeadValues(r.seq, 1)
	if err != nil {
		return Message{}, err
	}
	if len(ds) == 0 || ds[0].Seq != r.seq {
		return Message{}, fmt.Errorf("%w: no dead value %d (pending values are listed by key)", ErrNotFound, r.seq)
	}
	if r.fenced && ds[0].PublishedAt.UnixNano() != r.at {
		return Message{}, fmt.Errorf("%w: no dead value %s: the dead value %d was published at %d", ErrNotFound,
			ref, r.seq, ds[0].PublishedAt.UnixNano())
	}
	m := fromDeadValue(ds[0])
	m.Payload = ds[0].Payload
	return m, nil
}

func (s deadSetSource[K]) RequeueDead(_ context.Context, ref string) error {
	return s.deadAction(ref, refusing(s.s.RequeueDeadValue), refusing(s.s.RequeueDead))
}

func (s deadSetSource[K]) PurgeDead(_ context.Context, ref string) error {
	return s.deadAction(ref, s.s.PurgeDeadValue, s.s.PurgeDead)
}

// deadAction runs act on the dead value ref names, which act checks by
// its publish time: a seq@published-unix-ns reference. A bare seq, read
// before a crash, may name another value since: it is taken only for a
// dead value whose publish time cannot be read (its record is damaged,
// and the list names it so), which bySeq acts on.
func (s deadSetSource[K]) deadAction(ref string, act func(queue.DeadValue[K]) error, bySeq func(uint64) error) error {
	r, err := parseDeadRef(ref)
	if err != nil {
		return err
	}
	if !r.fenced {
		err = s.timeless(ref, r.seq, bySeq)
	} else {
		err = act(queue.DeadValue[K]{Seq: r.seq, PublishedAt: time.Unix(0, r.at)})
	}
	if err != nil {
		return actionError(err)
	}
	return nil
}

// timeless runs bySeq on the dead value seq while its publish time
// cannot be read; ref, a bare seq, is refused for any other.
func (s deadSetSource[K]) timeless(ref string, seq uint64, bySeq func(uint64) error) error {
	ds, err := s.s.DeadValues(seq, 1)
	if err != nil {
		return err
	}
	if len(ds) == 0 || ds[0].Seq != seq {
		return fmt.Errorf("%w: no dead value %d", ErrNotFound, seq)
	}
	if !ds[0].PublishedAt.IsZero() {
		return fmt.Errorf("%w: dead value reference %q is not seq@published-unix-ns (as the dead list gives it)", ErrInvalid, ref)
	}
	return bySeq(seq)
}

// deadRef is a reference to a sorted queue's dead value: its seq and,
// when fenced, its publish time in unix ns.
type deadRef struct {
	seq    uint64
	at     int64
	fenced bool
}

// parseDeadRef reads "seq@published-unix-ns" or a bare seq.
func parseDeadRef(ref string) (deadRef, error) {
	seqText, atText, fenced := strings.Cut(ref, "@")
	r := deadRef{fenced: fenced}
	var err error
	r.seq, err = strconv.ParseUint(seqText, 10, 64)
	if err == nil && fenced {
		r.at, err = strconv.ParseInt(atText, 10, 64)
	}
	if err != nil || r.seq == 0 {
		return deadRef{}, fmt.Errorf("%w: dead value reference %q is not seq@published-unix-ns", ErrInvalid, ref)
	}
	return r, nil
}

// fromDeadValue converts a dead value; its Ref is seq@published-unix-ns,
// or its seq alone when its publish time cannot be read (zero).
func fromDeadValue[K queue.SortKey](d queue.DeadValue[K]) Message {
	seq := strconv.FormatUint(d.Seq, 10)
	ref := seq
	if !d.PublishedAt.IsZero() {
		ref += "@" + strconv.FormatInt(d.PublishedAt.UnixNano(), 10)
	}
	return Message{Ref: ref, ID: d.Key + "/" + seq, State: queue.StateDead.String(), EnqueuedAt: d.PublishedAt,
		Deliveries: d.Deliveries, Reason: d.Reason, Size: len(d.Payload),
		Headers: map[string]string{"key": d.Key, "sort": formatSort(d.Sort)}}
}

// Keys pages by key; Next is the last key listed, written as keyCursor
// writes it, and after is read back by parseKeyCursor.
func (s sortedSource[K]) Keys(_ context.Context, after string, limit int) (KeyPage, error) {
	from, err := parseKeyCursor(after)
	if err != nil {
		return KeyPage{}, err
	}
	ks, err := s.keysAfter(from, after != "", limit+1)
	if err != nil {
		return KeyPage{}, err
	}
	p := KeyPage{Keys: make([]Key, 0, min(len(ks), limit))}
	for i, k := range ks {
		if i == limit {
			p.Next = keyCursor(ks[i-1].Key)
			break
		}
		p.Keys = append(p.Keys, Key{Key: k.Key, Values: k.Values, First: formatSort(k.First), Oldest: k.Oldest})
	}
	return p, nil
}

// keysAfter returns up to n keys after from, or from the first when
// past is false. Sorted.Keys reads an empty after as the first page, so
// the keys after the empty key are those from the first, less it.
func (s sortedSource[K]) keysAfter(from string, past bool, n int) ([]queue.KeyInfo[K], error) {
	if from != "" || !past {
		return s.s.Keys(from, n)
	}
	ks, err := s.s.Keys("", n+1)
	if len(ks) > 0 && ks[0].Key == "" {
		ks = ks[1:]
	}
	return ks[:min(len(ks), n)], err
}

// keyCursor is the page position after key: the key itself, or, when it
// is not UTF-8 (JSON, which carries the position to the page and back,
// would replace its bad bytes), is empty or starts with "~", "~" and its
// bytes in hex. Every key's position is read back exactly
// (parseKeyCursor).
func keyCursor(key string) string {
	if !utf8.ValidString(key) || key == "" || strings.HasPrefix(key, "~") {
		return "~" + hex.EncodeToString([]byte(key))
	}
	return key
}

// parseKeyCursor returns the key a page position names (see keyCursor);
// "" for the first page.
func parseKeyCursor(after string) (string, error) {
	h, encoded := strings.CutPrefix(after, "~")
	if !encoded {
		return after, nil
	}
	b, err := hex.DecodeString(h)
	if err != nil {
		return "", fmt.Errorf("%w: key page position %q: %w", ErrInvalid, after, err)
	}
	return string(b), nil
}

// formatSort formats a sort key for display.
func formatSort(v any) string {
	switch k := v.(type) {
	case time.Time:
		return k.UTC().Format(time.RFC3339Nano)
	}
	return fmt.Sprint(v)
}
