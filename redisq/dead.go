package redisq

import (
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
	d, err2 := strconv.Atoi(parts[1])
	n, err3 := strconv.Atoi(parts[3])
	if err := errors.Join(err1, err2, err3); err != nil || n < 0 || n > len(parts[4]) {
		return in, fmt.Errorf("%w: record %q", queue.ErrCorrupt, raw)
	}
	return info{ID: parts[4][:n], Producer: p, Deliveries: d, Token: parts[2], Reason: parts[4][n:]}, nil
}

// DeadLetters returns up to max dead letters whose sequence is at least
// from, oldest first, with their payloads.
func (q *Queue) DeadLetters(from uint64, max int) ([]queue.DeadLetter, error) {
	if max <= 0 {
		return nil, nil
	}
	ctx, cancel := q.opContext()
	defer cancel()
	v, err := q.run(ctx, fnInspect, q.o.Clock.Now(), "dead", strconv.FormatUint(from, 10), max)
	if err != nil {
		return nil, scriptErr("dead letters", err)
	}
	reply, _ := v.([]any)
	out := make([]queue.DeadLetter, 0, len(reply)/3)
	for i := 0; i+2 < len(reply); i += 3 {
		seq := uint64(toInt(reply[i]))
		raw, _ := reply[i+1].(string)
		in, err := decodeInfo(raw)
		if err != nil {
			return nil, fmt.Errorf("redisq: dead letter %d: decode: %w", seq, err)
		}
		d := queue.DeadLetter{ID: in.ID, Seq: seq, Reason: in.Reason, Deliveries: in.Deliveries}
		// A body that does not decode leaves the payload out, not the
		// letter: the reason says so, so that it can still be requeued
		// or purged by id.
		if m, err := decodeMessage(reply[i+2], queue.Receipt{Seq: seq}); err != nil {
			if !strings.HasPrefix(d.Reason, corruptReason) {
				d.Reason += "; " + corruptReason + err.Error()
			}
		} else {
			d.EnqueuedAt, d.Payload, d.Headers = m.EnqueuedAt, m.Payload, m.Headers
		}
		out = append(out, d)
	}
	return out, nil
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

func (q *Queue) changeDead(op, id string) error {
	n, err := q.runDead(op, id, 1)
	if err != nil {
		return err
	}
	if n < 0 {
		return fmt.Errorf("%w: no dead letter %q", queue.ErrNotFound, id)
	}
	return nil
}

// changeAllDead works through the dead set in script calls of 1000, so
// that no one call blocks the server for long.
func (q *Queue) changeAllDead(op string) (int, error) {
	const chunk = 1000
	total := 0
	for {
		n, err := q.runDead(op, "", chunk)
		total += n
		if err != nil || n < chunk {
			return total, err
		}
	}
}

func (q *Queue) runDead(op, id string, limit int) (int, error) {
	ctx, cancel := q.opContext()
	defer cancel()
	v, err := q.run(ctx, fnDead, q.o.Clock.Now(), op, id, limit)
	if err != nil {
		return 0, scriptErr(op+" dead", err)
	}
	return int(toInt(v)), nil
}
