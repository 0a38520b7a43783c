package redisq

import (
	"cmp"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/walq/walq/queue"
)

// info is a message's mutable record as the scripts keep it.
type info struct {
	ID         string // message id
	Producer   int    // 1 when the producer gave the id
	Deliveries int    // deliveries so far
	Token      string // the live delivery's lease token; "" when none
	Reason     string // dead-letter reason
}

// decodeInfo is the mirror of scripts/common.lua's encode:
//
//	producer ':' deliveries ':' token ':' len(id) ':' id reason
func decodeInfo(raw string) (info, error) {
	var in info
	parts := strings.SplitN(raw, ":", 5)
	if len(parts) != 5 {
		return in, fmt.Errorf("%w: record %q", queue.ErrCorrupt, raw)
	}
	p, err1 := strconv.Atoi(parts[0])
	d, err2 := parseCount(parts[1])
	n, err3 := strconv.Atoi(parts[3])
	if err := errors.Join(err1, err2, err3); err != nil || n < 0 || n > len(parts[4]) {
		return in, fmt.Errorf("%w: record %q", queue.ErrCorrupt, raw)
	}
	return info{ID: parts[4][:n], Producer: p, Deliveries: d, Token: parts[2], Reason: parts[4][n:]}, nil
}

// DeadLetters returns up to max dead letters whose sequence is at least
// from, oldest first, with their payloads; max <= 0 means all of them, as
// queue.Queue.DeadLetters. They are listed in calls of up to 1000
// (deadPage), each read as one step on the server: a letter that leaves
// the dead-letter set after its call is listed as it was. A letter whose
// stored record or body cannot be read (see doc.go) is listed all the
// same, with what can still be told: its reason then says "corrupt
// record: " and what is wrong; its id and payload come from its body, and
// are empty where the body does not decode either.
func (q *Queue) DeadLetters(from uint64, max int) ([]queue.DeadLetter, error) {
	out := []queue.DeadLetter{}
	for max <= 0 || len(out) < max {
		n := deadPage
		if max > 0 {
			n = min(n, max-len(out))
		}
		page, err := q.deadLetterPage(from, n)
		if err != nil {
			return nil, err
		}
		out = append(out, page...)
		if len(page) < n {
			break
		}
		next := page[len(page)-1].Seq + 1
		if next <= from { // a member that is no seq (written by hand) ends the listing
			break
		}
		from = next
	}
	return out, nil
}

// deadLetterPage lists up to n dead letters from the seq from on, in one
// call.
func (q *Queue) deadLetterPage(from uint64, n int) ([]queue.DeadLetter, error) {
	ctx, cancel := q.opContext()
	defer cancel()
	v, err := q.run(ctx, fnInspect, q.o.Clock.Now(), "dead", strconv.FormatUint(from, 10), n)
	if err != nil {
		return nil, scriptErr("dead letters", err)
	}
	reply, _ := v.([]any)
	out := make([]queue.DeadLetter, 0, len(reply)/3)
	for i := 0; i+2 < len(reply); i += 3 {
		out = append(out, deadLetter(uint64(toInt(reply[i])), reply[i+1], reply[i+2]))
	}
	return out, nil
}

// deadLetter reads the dead letter seq from its record rec and body, as
// the inspect script returns them (nil when absent). A record or body
// that cannot be read leaves out what it held, not the letter, so that
// the letter can still be requeued or purged by id.
func deadLetter(seq uint64, rec, raw any) queue.DeadLetter {
	d := queue.DeadLetter{Seq: seq}
	s, ok := rec.(string)
	in, err := decodeInfo(s)
	switch {
	case !ok:
		d.Reason = corruptReason + "missing"
	case err != nil:
		d.Reason = corruptReason + "unreadable"
	default:
		d.ID, d.Reason, d.Deliveries = in.ID, in.Reason, in.Deliveries
	}
	m, err := decodeMessage(raw, queue.Receipt{Seq: seq})
	if err != nil {
		if !strings.HasPrefix(d.Reason, corruptReason) {
			d.Reason += "; " + corruptReason + err.Error()
		}
		return d
	}
	if d.ID == "" {
		d.ID = m.ID
	}
	d.EnqueuedAt, d.Payload, d.Headers = m.EnqueuedAt, m.Payload, m.Headers
	return d
}

// RequeueDead makes the dead letter with id ready again, with its delivery
// count reset.
func (q *Queue) RequeueDead(id string) error { return q.changeDead("requeue", id) }

// PurgeDead removes the dead letter with id for good.
func (q *Queue) PurgeDead(id string) error { return q.changeDead("purge", id) }

// RequeueAllDead makes every dead letter ready again and returns how many.
func (q *Queue) RequeueAllDead() (int, error) { return q.changeAllDead("requeue") }

// PurgeAllDead removes every dead letter and returns how many.
func (q *Queue) PurgeAllDead() (int, error) { return q.changeAllDead("purge") }

// changeDead requeues or purges the dead letter id. No message has the
// empty id (an enqueue without one gets a generated id), and the dead
// function takes it for "every letter": it is refused here.
func (q *Queue) changeDead(op, id string) error {
	if id == "" {
		return fmt.Errorf("%w: no dead letter %q", queue.ErrNotFound, id)
	}
	n, err := q.runDead(op, id, 1)
	if n < 0 { // nothing done, whatever the WAIT after it
		return fmt.Errorf("%w: no dead letter %q", queue.ErrNotFound, id)
	}
	return err
}

// changeAllDead works through the dead set in script calls of 1000, so
// that no one call blocks the server for long. A call whose WAIT fell
// short (ErrNotDurable) made its change: the work goes on, and that error
// is returned with the count of all.
func (q *Queue) changeAllDead(op string) (int, error) {
	const chunk = 1000
	total := 0
	var short error
	for {
		n, err := q.runDead(op, "", chunk)
		total += max(n, 0)
		if err != nil && !errors.Is(err, ErrNotDurable) {
			return total, err
		}
		short = cmp.Or(short, err)
		if n < chunk {
			return total, short
		}
	}
}

func (q *Queue) runDead(op, id string, limit int) (int, error) {
	ctx, cancel := q.opContext()
	defer cancel()
	v, err := q.run(ctx, fnDead, q.o.Clock.Now(), op, id, limit)
	if !replied(v, err) {
		return 0, scriptErr(op+" dead", err)
	}
	return int(toInt(v)), err
}
