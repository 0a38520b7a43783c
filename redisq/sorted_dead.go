package redisq

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/walq/walq/queue"
)

// deadPage is the most dead values one call of the read function lists,
// and one call of reviveall or purgeall changes (scripts/sorted_ops.lua).
const deadPage = 1000

// noKeyReason ends the reason of a dead value whose key the queue did not
// record: a handle of an earlier version dead-lettered it.
const noKeyReason = "key not recorded (dead-lettered by an earlier version of redisq): it can be purged, not requeued"

// DeadValues returns up to max dead values whose Seq is at least from, in
// Seq order, with their payloads; max <= 0 means all of them, as
// queue.Sorted.DeadValues. A value whose stored record cannot be read
// whole is listed all the same, with what of it reads (its publish time,
// read as RequeueDeadValue's fence reads it, else zero; its payload and
// sort key when they decode, else empty and zero; its delivery count when
// it reads as one, else zero), its reason ending with "; corrupt record: "
// and what is wrong. A value dead-lettered by a
// handle of an earlier version, which did not record its key, is listed
// with an empty Key, its reason saying so; it can be purged, not
// requeued. Its Seq is the queue's counter of publishes, never reused
// while the server keeps its data.
func (s *Sorted[K]) DeadValues(from uint64, max int) ([]queue.DeadValue[K], error) {
	out := []queue.DeadValue[K]{}
	for max <= 0 || len(out) < max {
		n := deadPage
		if max > 0 {
			n = min(n, max-len(out))
		}
		page, err := s.deadPage(from, n)
		if err != nil {
			return nil, err
		}
		out = append(out, page...)
		if len(page) < n {
			break
		}
		from = page[len(page)-1].Seq + 1
	}
	return out, nil
}

// deadPage lists up to n dead values from the seq from on, in one call.
func (s *Sorted[K]) deadPage(from uint64, n int) ([]queue.DeadValue[K], error) {
	ctx, cancel := s.opContext()
	defer cancel()
	v, err := s.run(ctx, s.o.Clock.Now(), "deadlist", strconv.FormatUint(from, 10), n)
	if err != nil {
		return nil, err
	}
	r, _ := v.([]any)
	if len(r)%5 != 0 {
		return nil, fmt.Errorf("redisq: dead values: unexpected reply %v", v)
	}
	out := make([]queue.DeadValue[K], 0, len(r)/5)
	for i := 0; i < len(r); i += 5 {
		d, err := deadValue[K](r[i : i+5])
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// deadValue reads one dead value from the listing's five fields: seq,
// pend member, reason, deliveries and stored value, nil when absent.
func deadValue[K queue.SortKey](f []any) (queue.DeadValue[K], error) {
	seqText, _ := f[0].(string)
	seq, err := strconv.ParseUint(seqText, 10, 64)
	if err != nil {
		return queue.DeadValue[K]{}, fmt.Errorf("redisq: dead values: unexpected seq %v", f[0])
	}
	d := queue.DeadValue[K]{Seq: seq}
	d.Reason, _ = f[2].(string)
	member, _ := f[1].(string)
	if key, ok := memberKey(member); ok {
		d.Key = key
	} else {
		d.Reason += "; " + noKeyReason
	}
	n, wrong := deadCount(f[3])
	d.Deliveries = n
	if wrong != "" {
		d.Reason += "; " + corruptReason + wrong
	}
	raw, ok := f[4].(string)
	if !ok {
		d.Reason += "; " + corruptReason + "missing"
		return d, nil
	}
	at, atOK := storedAt([]byte(raw))
	if atOK {
		d.PublishedAt = time.Unix(0, at)
	}
	var sv sortedValue
	if err := unmarshalStored(raw, &sv); err != nil {
		d.Reason += "; " + corruptReason + err.Error()
		return d, nil
	}
	d.Payload = sv.Payload
	if k, err := fromSortPart[K](sv.Sort); err != nil {
		d.Reason += "; " + corruptReason + err.Error()
	} else {
		d.Sort = k
	}
	if !atOK {
		d.Reason += "; " + corruptReason + "publish time not stored as an int64 after the sort part"
	}
	return d, nil
}

// deadCount reads a dead value's delivery count from the listing's
// field v, and says what is wrong with it ("" when nothing). Every value
// has one from its publish on (HSET 0, then HINCRBY at each pull) until it
// is acked or purged: one that is missing, or not a count (a garbled
// hash field), reads as 0, as the scripts read it (giveback,
// killPastLimit), and the listing says so rather than show a count of 0
// as if read.
func deadCount(v any) (int, string) {
	s, ok := v.(string)
	if !ok {
		return 0, "delivery count missing"
	}
	n, err := parseCount(s)
	if err != nil || n < 0 {
		return 0, fmt.Sprintf("delivery count %q is not a count", s)
	}
	return n, ""
}

// storedAt returns the publish time (unix ns) that the stored value raw
// holds, read as the fence of RequeueDeadValue reads it (publishedAt in
// scripts/sorted.lua): raw is the msgpack array {sort part (bin),
// publish time (int64), payload}. False when raw does not read so.
func storedAt(raw []byte) (int64, bool) {
	if len(raw) < 12 || raw[0] != 0x93 {
		return 0, false
	}
	var at uint64 // where the publish time's int64 marker is
	switch raw[1] {
	case 0xc0:
		at = 2
	case 0xc4:
		at = 3 + uint64(raw[2])
	case 0xc5:
		at = 4 + uint64(binary.BigEndian.Uint16(raw[2:4]))
	case 0xc6:
		at = 6 + uint64(binary.BigEndian.Uint32(raw[2:6]))
	default:
		return 0, false
	}
	if uint64(len(raw)) < at+9 || raw[at] != 0xd3 {
		return 0, false
	}
	return int64(binary.BigEndian.Uint64(raw[at+1 : at+9])), true
}

// memberKey returns the key of a pend member: u16 len(key) | key | ...
func memberKey(m string) (string, bool) {
	if len(m) < 2 {
		return "", false
	}
	n := int(binary.BigEndian.Uint16([]byte(m[:2])))
	if len(m) < 2+n {
		return "", false
	}
	return m[2 : 2+n], true
}

// RequeueDead puts the dead value seq back among the pending ones, under
// its key at its sort key, with its delivery count reset, in one call of
// the server. Unlike queue.Sorted.RequeueDead it does not read the
// payload first: a value whose stored record is damaged is requeued, and
// the pull that cannot read it dead-letters it again. A value whose key
// was not recorded (see DeadValues) is refused with an error wrapping
// queue.ErrCorrupt. A value purged or requeued meanwhile is not found
// (queue.ErrNotFound).
func (s *Sorted[K]) RequeueDead(seq uint64) error { return s.changeDead("revive", seq, nil) }

// PurgeDead removes the dead value seq for good, with its payload.
func (s *Sorted[K]) PurgeDead(seq uint64) error { return s.changeDead("purge", seq, nil) }

// RequeueDeadValue is RequeueDead of the dead value d, as DeadValues
// returned it: it acts only while the dead value d.Seq is the one
// published at d.PublishedAt (to the nanosecond), and otherwise returns
// queue.ErrNotFound and changes nothing, as queue.Sorted.RequeueDeadValue.
// A seq can be given again when the server loses writes (a restart under
// appendfsync everysec, a failover): the time tells the two values
// apart. A value whose publish time cannot be read (DeadValues lists it
// with a zero PublishedAt) is refused with an error wrapping
// queue.ErrCorrupt; name it by its seq alone. A zero d.PublishedAt
// matches no publish time: ErrCorrupt when the value's cannot be read,
// queue.ErrNotFound else.
func (s *Sorted[K]) RequeueDeadValue(d queue.DeadValue[K]) error {
	return s.changeDead("revive", d.Seq, &d.PublishedAt)
}

// PurgeDeadValue is PurgeDead of the dead value d, fenced as
// RequeueDeadValue is.
func (s *Sorted[K]) PurgeDeadValue(d queue.DeadValue[K]) error {
	return s.changeDead("purge", d.Seq, &d.PublishedAt)
}

// noTime is the fence of a zero publish time: shorter than the 8 bytes of
// any publish time, it matches none, and the script still reads the
// stored one, so that a value whose time cannot be read is reported so.
const noTime = "-"

// changeDead runs op (revive or purge) on the dead value seq; when at is
// not nil, only if it was published at *at.
func (s *Sorted[K]) changeDead(op string, seq uint64, at *time.Time) error {
	fence := ""
	if at != nil {
		fence = noTime
		if !at.IsZero() {
			fence = string(binary.BigEndian.AppendUint64(nil, uint64(at.UnixNano())))
		}
	}
	ctx, cancel := s.opContext()
	defer cancel()
	v, err := s.run(ctx, s.o.Clock.Now(), op, strconv.FormatUint(seq, 10), fence)
	if !replied(v, err) {
		return err
	}
	switch toInt(v) { // what was not done, whatever the WAIT after it
	case 0:
		return err
	case -1:
		return fmt.Errorf("%w: no dead value %d", queue.ErrNotFound, seq)
	case -2:
		if at.IsZero() {
			return fmt.Errorf("%w: no dead value %d published at the zero time", queue.ErrNotFound, seq)
		}
		return fmt.Errorf("%w: no dead value %d published at %s: the dead value %d was published at another time (the server lost the value the name was read for)",
			queue.ErrNotFound, seq, at.UTC().Format(time.RFC3339Nano), seq)
	case -3:
		return fmt.Errorf("%w: dead value %d: its publish time cannot be read: name it by its seq alone", queue.ErrCorrupt, seq)
	case -4:
		return fmt.Errorf("%w: dead value %d: %s", queue.ErrCorrupt, seq, noKeyReason)
	}
	return fmt.Errorf("redisq: %s dead value: unexpected reply %v", op, v)
}

// RequeueAllDead puts every dead value back among the pending ones and
// returns how many, in calls of up to 1000 values each, so that no call
// blocks the server for long. The values whose key was not recorded (see
// DeadValues) stay dead: it requeues the others, and returns their count
// with an error wrapping queue.ErrCorrupt that names the values it left
// (the first few, and how many more).
func (s *Sorted[K]) RequeueAllDead() (int, error) {
	n, left, err := s.changeAllDead("reviveall")
	if len(left) > 0 && (err == nil || errors.Is(err, ErrNotDurable)) {
		err = errors.Join(fmt.Errorf("%w: %d dead values left dead (%s): %s", queue.ErrCorrupt, len(left), firstFew(left), noKeyReason), err)
	}
	return n, err
}

// PurgeAllDead removes every dead value, with its payload, and returns
// how many, in calls of up to 1000 values each.
func (s *Sorted[K]) PurgeAllDead() (int, error) {
	n, _, err := s.changeAllDead("purgeall")
	return n, err
}

// changeAllDead runs op (reviveall or purgeall) over the dead set from
// its first value on, and returns how many values it changed and the
// seqs it left.
func (s *Sorted[K]) changeAllDead(op string) (int, []string, error) {
	total, from := 0, "0"
	var left []string
	var short error // ErrNotDurable of a call that made its change: the work goes on
	for {
		ctx, cancel := s.opContext()
		v, err := s.run(ctx, s.o.Clock.Now(), op, from)
		cancel()
		if !replied(v, err) {
			return total, left, err
		}
		short = cmp.Or(short, err)
		r, _ := v.([]any)
		if len(r) != 3 {
			return total, left, fmt.Errorf("redisq: %s: unexpected reply %v", op, v)
		}
		total += int(toInt(r[0]))
		l, _ := r[2].([]any)
		for _, x := range l {
			left = append(left, fmt.Sprint(x))
		}
		if from, _ = r[1].(string); from == "" {
			return total, left, short
		}
	}
}

// firstFew names up to five of seqs (or other names), and how many more
// there are.
func firstFew(seqs []string) string {
	if len(seqs) <= 5 {
		return strings.Join(seqs, ", ")
	}
	return strings.Join(seqs[:5], ", ") + fmt.Sprintf(" and %d more", len(seqs)-5)
}
