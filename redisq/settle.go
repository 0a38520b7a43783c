package redisq

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/walq/walq/queue"
)

// Ack removes the message of the delivery r for good; ErrLeaseLost if
// that delivery no longer owns it. Concurrent Acks of one handle are
// settled together by one script call.
func (q *Queue) Ack(r queue.Receipt) error {
	if q.isClosed() {
		return queue.ErrClosed
	}
	return q.acks.do(r, func(rs []queue.Receipt) []error { return q.settle("ack", "", rs) })
}

// Nack gives the message of the delivery r back: ready after delay (at
// once when 0), or dead once it has had MaxDeliveries.
func (q *Queue) Nack(r queue.Receipt, delay time.Duration) error {
	if delay < 0 {
		return fmt.Errorf("%w: negative nack delay %v", queue.ErrInvalidOptions, delay)
	}
	now := q.o.Clock.Now()
	return q.settleAt(now, "nack", span(now, delay), []queue.Receipt{r})[0]
}

// Extend sets the lease of the delivery r to run out d from now; d may be
// longer or shorter than AckTimeout.
func (q *Queue) Extend(r queue.Receipt, d time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("%w: lease extension %v is not positive", queue.ErrInvalidOptions, d)
	}
	now := q.o.Clock.Now()
	return q.settleAt(now, "extend", span(now, d), []queue.Receipt{r})[0]
}

// DeadLetter moves the message of the delivery r to the dead-letter set.
func (q *Queue) DeadLetter(r queue.Receipt, reason string) error {
	return q.settleOne("dead", reason, r)
}

// AckID acks the message with the given id, whichever delivery holds it.
// ErrNotFound if no delivery of that id is in flight.
func (q *Queue) AckID(id string) error { return q.settleID(q.o.Clock.Now(), "ack", "", id) }

// NackID is Nack for the delivery that holds the message with id.
func (q *Queue) NackID(id string, delay time.Duration) error {
	if delay < 0 {
		return fmt.Errorf("%w: negative nack delay %v", queue.ErrInvalidOptions, delay)
	}
	now := q.o.Clock.Now()
	return q.settleID(now, "nack", span(now, delay), id)
}

// ExtendID is Extend for the delivery that holds the message with id.
func (q *Queue) ExtendID(id string, d time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("%w: lease extension %v is not positive", queue.ErrInvalidOptions, d)
	}
	now := q.o.Clock.Now()
	return q.settleID(now, "extend", span(now, d), id)
}

// DeadLetterID is DeadLetter for the delivery that holds the message with id.
func (q *Queue) DeadLetterID(id, reason string) error {
	return q.settleID(q.o.Clock.Now(), "dead", reason, id)
}

func (q *Queue) settleOne(op, arg string, r queue.Receipt) error {
	errs := q.settle(op, arg, []queue.Receipt{r})
	return errs[0]
}

// settle runs one settle script over receipts and returns an error per
// receipt; acks run the ack1 function, which the server runs for less,
// and go to settle only when ack1 leaves them to it.
func (q *Queue) settle(op, arg string, rs []queue.Receipt) []error {
	return q.settleAt(q.o.Clock.Now(), op, arg, rs)
}

// settleAt is settle at the time now, which an argument that ends a time
// after now (span) was computed from.
func (q *Queue) settleAt(now time.Time, op, arg string, rs []queue.Receipt) []error {
	return q.settleIn(context.Background(), now, op, arg, rs)
}

// settleIn is settleAt with the context its calls run under, each bounded
// by callTimeout from there: giveBack's marks a call Close waits for.
func (q *Queue) settleIn(ctx context.Context, now time.Time, op, arg string, rs []queue.Receipt) []error {
	args := make([]any, 0, 3+2*len(rs))
	args = append(args, op, arg, "r")
	for _, r := range rs {
		args = append(args, strconv.FormatUint(r.Seq, 10), strconv.FormatUint(r.Lease, 10))
	}
	var codes []int64
	var err error
	lean := op == "ack" && len(rs) <= maxCoalesce
	if lean {
		codes, err = q.runAck1(ctx, args[3:])
	}
	if !lean || err == nil && codes == nil {
		codes, err = q.runSettle(ctx, now, op, args)
	}
	errs := make([]error, len(rs))
	for i, r := range rs {
		switch {
		case codes != nil && codes[i] != 0: // nothing done, whatever the WAIT after it
			errs[i] = fmt.Errorf("%w: receipt %s", queue.ErrLeaseLost, r)
		case err != nil:
			errs[i] = err
		}
	}
	return errs
}

func (q *Queue) settleID(now time.Time, op, arg, id string) error {
	codes, err := q.runSettle(context.Background(), now, op, []any{op, arg, "i", id})
	if codes == nil {
		return err
	}
	if codes[0] != 0 { // nothing done, whatever the WAIT after it
		return fmt.Errorf("%w: no delivery of %q in flight", queue.ErrNotFound, id)
	}
	return err
}

// runSettle runs the settle function over args (settle's) and returns
// its code per item; when only the WAIT after the call failed, the codes
// with ErrNotDurable, so that an item the call did not settle (a stale
// receipt, an id not in flight) is reported as such. The call runs under
// parent, bounded by callTimeout.
func (q *Queue) runSettle(parent context.Context, now time.Time, op string, args []any) ([]int64, error) {
	ctx, cancel := context.WithTimeout(parent, q.callTimeout())
	defer cancel()
	v, err := q.run(ctx, fnSettle, now, args...)
	if !replied(v, err) {
		return nil, scriptErr(op, err)
	}
	reply, _ := v.([]any)
	codes := make([]int64, len(reply))
	for i, c := range reply {
		codes[i] = toInt(c)
	}
	per := 1
	if args[2] == "r" {
		per = 2
	}
	if len(codes) != (len(args)-3)/per {
		return nil, fmt.Errorf("redisq: %s: unexpected reply %v", op, v)
	}
	return codes, err
}

// runAck1 acks deliveries, each named by its seq and lease token, with
// the ack1 function; it returns their codes, as runSettle does, or none
// (nil, nil) when ack1 leaves them to settle: one of them names a
// message a producer named, and more than one were gathered. As
// runSettle, it returns the codes with ErrNotDurable when only the WAIT
// after the call failed. The call runs under parent, bounded by
// callTimeout.
func (q *Queue) runAck1(parent context.Context, receipts []any) ([]int64, error) {
	ctx, cancel := context.WithTimeout(parent, q.callTimeout())
	defer cancel()
	v, err := q.call(ctx, fnAck1, append([]any{unixMicros(q.o.Clock.Now()), windowMicros(q.o.DedupWindow)}, receipts...))
	if !replied(v, err) {
		return nil, scriptErr("ack", err)
	}
	if c, ok := v.(int64); ok && c == -3 && err != nil {
		return nil, nil // nothing written: settle's call decides
	}
	codes, cerr := ack1Codes(v, len(receipts)/2)
	if cerr != nil {
		return nil, cerr
	}
	return codes, err
}

// ack1Codes reads ack1's reply for n receipts: a code for one, a string
// of n characters '0' and '1' for more, or -3 for "call settle" (nil
// codes).
func ack1Codes(v any, n int) ([]int64, error) {
	switch c := v.(type) {
	case int64:
		if n == 1 && c >= 0 {
			return []int64{c}, nil
		}
		if n > 1 && c == -3 {
			return nil, nil
		}
	case string:
		if len(c) == n && n > 1 {
			codes := make([]int64, n)
			for i := range c {
				codes[i] = int64(c[i] - '0')
			}
			if strings.Trim(c, "01") == "" {
				return codes, nil
			}
		}
	}
	return nil, fmt.Errorf("redisq: ack: unexpected reply %v", v)
}
