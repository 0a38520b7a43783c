package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/walq/walq/internal/twin"
	"github.com/walq/walq/queue"
)

var enqueueCmd = &command{
	name:  "enqueue",
	args:  "[--id ID] [--header k=v]... [--delay D] DIR [PAYLOAD]",
	short: "add a message (payload from the argument or stdin)",
	long: `Enqueue adds one message to the queue in DIR, creating the queue if DIR
holds none, and prints its id. The payload is PAYLOAD, or stdin when
PAYLOAD is absent or "-". The message is on disk (fsynced) when enqueue
returns.

An --id that a live message already has is refused (exit status 6), so a
script that retries enqueues once. So is an id that an acked message had
and the directory still remembers: walq does not know the application's
DedupWindow, so it keeps every id the queue holds (stats: dedup ids).`,
	example: `walq enqueue /var/lib/app/jobs 'resize photo 42'
walq enqueue --id order-1234 --header tenant=acme --delay 10m /var/lib/app/jobs < order.json`,
	exits:        []int{exitOK, exitFailure, exitCorrupt, exitLocked, exitDuplicate},
	serverWrites: true,
	nargs:        [2]int{1, 2},
	setup: func(fs *flag.FlagSet) func(*env, []string) error {
		var o enqueueOptions
		fs.StringVar(&o.id, "id", "", "message `ID` (default: a random UUID)")
		fs.Var(&o.headers, "header", "a header `k=v`; repeat for more")
		fs.DurationVar(&o.delay, "delay", 0, "deliver no sooner than `D` from now, e.g. 30s or 5m")
		return func(e *env, args []string) error { return runEnqueue(e, args, o) }
	},
}

type enqueueOptions struct {
	id      string
	headers headerFlag
	delay   time.Duration
}

// headerFlag collects repeated --header k=v flags.
type headerFlag map[string]string

func (h *headerFlag) String() string {
	if h == nil || *h == nil {
		return ""
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(*h)) {
		parts = append(parts, k+"="+(*h)[k])
	}
	return strings.Join(parts, ",")
}

func (h *headerFlag) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("header %q is not k=v", s)
	}
	if *h == nil {
		*h = make(headerFlag)
	}
	(*h)[k] = v
	return nil
}

func runEnqueue(e *env, args []string, o enqueueOptions) (err error) {
	if o.delay < 0 {
		return usagef("--delay %v is negative", o.delay)
	}
	payload, err := readPayload(e, args[1:])
	if err != nil {
		return err
	}
	q, err := openAck(e, args[0], nil, true)
	if err != nil {
		return err
	}
	defer closeAny(q, &err)
	var opts []queue.EnqueueOption
	if o.id != "" {
		opts = append(opts, queue.WithID(o.id))
	}
	if len(o.headers) > 0 {
		opts = append(opts, queue.WithHeaders(o.headers))
	}
	if o.delay > 0 {
		opts = append(opts, queue.WithDelay(o.delay))
	}
	id, err := q.Enqueue(context.Background(), payload, opts...)
	if err == nil {
		fmt.Fprintln(e.stdout, id)
	}
	return err
}

// readPayload returns the payload argument, or stdin when it is absent or
// "-".
func readPayload(e *env, args []string) ([]byte, error) {
	if len(args) == 1 && args[0] != "-" {
		return []byte(args[0]), nil
	}
	if e.inTTY {
		fmt.Fprintln(e.stderr, "walq: reading the payload from stdin; end it with Ctrl-D")
	}
	b, err := io.ReadAll(e.stdin)
	if err != nil {
		return nil, fmt.Errorf("read payload from stdin: %w", err)
	}
	return b, nil
}

var dequeueCmd = &command{
	name:  "dequeue",
	args:  "[--json] [--wait D] [--ack-timeout D] DIR",
	short: "lease the next message and print it with its receipt",
	long: `Dequeue leases the next ready message of the queue in DIR and prints it:
a few header lines (receipt, id, delivery, enqueued, one "header: k=v"
line per header), a blank line, then the payload as enqueued, followed
by a newline unless it ends with one. With --json it prints one JSON
object instead, the payload as text when printable, else base64.
` + base64Note + `

The lease lasts --ack-timeout. Finish the message with 'walq ack DIR
RECEIPT' (or give it back with 'walq nack'); if no ack comes in time, the
message is delivered again. When no message is ready, dequeue waits up to
--wait, then exits with status 4.`,
	example: `walq dequeue /var/lib/app/jobs
receipt=$(walq dequeue --json /var/lib/app/jobs | jq -r .receipt)
walq dequeue --wait 30s --ack-timeout 5m /var/lib/app/jobs`,
	exits:        []int{exitOK, exitFailure, exitCorrupt, exitLocked, exitEmpty},
	serverWrites: true,
	nargs:        [2]int{1, 1},
	setup: func(fs *flag.FlagSet) func(*env, []string) error {
		var o dequeueOptions
		fs.BoolVar(&o.json, "json", false, "print one JSON object")
		fs.DurationVar(&o.wait, "wait", 0, "wait up to `D` for a message (0: do not wait)")
		fs.DurationVar(&o.ackTimeout, "ack-timeout", 30*time.Second, "the lease: ack within `D`")
		return func(e *env, args []string) error { return runDequeue(e, args[0], o) }
	},
}

type dequeueOptions struct {
	json       bool          // print JSON
	wait       time.Duration // how long to wait for a message
	ackTimeout time.Duration // the lease length
}

// messageJSON is a dequeued message as dequeue --json prints it.
type messageJSON struct {
	Receipt     string            `json:"receipt"`
	ID          string            `json:"id"`
	IDBase64    string            `json:"id_base64,omitempty"`
	Deliveries  int               `json:"deliveries"`
	EnqueuedAt  string            `json:"enqueued_at"`
	DeliveredAt string            `json:"delivered_at"`
	Headers     map[string]string `json:"headers,omitempty"`
	Headers64   map[string]string `json:"headers_base64,omitempty"`
	Payload     string            `json:"payload"`
	Encoding    string            `json:"payload_encoding"`
}

func runDequeue(e *env, dir string, o dequeueOptions) (err error) {
	if o.wait < 0 || o.ackTimeout <= 0 {
		return usagef("--wait must not be negative and --ack-timeout must be positive")
	}
	q, err := openAck(e, dir, &queue.Options{AckTimeout: o.ackTimeout}, false)
	if err != nil {
		return err
	}
	defer closeAny(q, &err)
	m, err := take(q, o.wait)
	if err != nil {
		return err
	}
	if o.json {
		return printMessageJSON(e.stdout, m)
	}
	if err := printMessage(e.stdout, m); err != nil {
		return err
	}
	if !bytes.HasSuffix(m.Payload, []byte("\n")) {
		fmt.Fprintln(e.stdout) // the output ends with a newline; --json has the exact payload
	}
	return nil
}

// take leases a message, waiting up to wait for one.
func take(q queue.AckQueue, wait time.Duration) (*queue.Message, error) {
	if wait == 0 {
		m, err := q.TryDequeue()
		if errors.Is(err, queue.ErrEmpty) {
			return nil, fmt.Errorf("%w: no message is ready", err)
		}
		return m, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	m, err := q.Dequeue(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		return nil, fmt.Errorf("%w: nothing ready within %v", queue.ErrEmpty, wait)
	}
	return m, err
}

func printMessageJSON(w io.Writer, m *queue.Message) error {
	p, enc := payloadText(m.Payload)
	j := messageJSON{Receipt: m.Receipt.String(), Deliveries: m.Deliveries,
		EnqueuedAt: jsonTime(m.EnqueuedAt), DeliveredAt: jsonTime(m.DeliveredAt), Payload: p, Encoding: enc}
	j.ID, j.IDBase64 = twin.Split(m.ID)
	j.Headers, j.Headers64 = twin.SplitHeaders(m.Headers)
	je := json.NewEncoder(w)
	je.SetEscapeHTML(false)
	return je.Encode(j)
}

// printMessage prints header lines, a blank line and the raw payload.
func printMessage(w io.Writer, m *queue.Message) error {
	fmt.Fprintf(w, "receipt: %s\nid: %s\ndelivery: %d\nenqueued: %s\n",
		m.Receipt, m.ID, m.Deliveries, shortTime(m.EnqueuedAt))
	for _, k := range slices.Sorted(maps.Keys(m.Headers)) {
		fmt.Fprintf(w, "header: %s=%s\n", k, m.Headers[k])
	}
	fmt.Fprintln(w)
	_, err := w.Write(m.Payload)
	return err
}

var ackCmd = &command{
	name:  "ack",
	args:  "DIR RECEIPT | --id ID DIR",
	short: "finish a delivery by its receipt",
	long: `Ack removes for good the message of the delivery RECEIPT (as printed by
'walq dequeue'), or of the delivery of message --id, from the queue in
DIR. It fails with exit status 5 if the lease ran out (the message is
ready again, maybe delivered to another consumer) or was already acked.`,
	example: `walq ack /var/lib/app/jobs 17.42.1796129517081275306
walq ack --id order-1234 /var/lib/app/jobs`,
	exits:        []int{exitOK, exitFailure, exitCorrupt, exitLocked, exitNotFound},
	serverWrites: true,
	nargs:        [2]int{1, 2},
	setup: func(fs *flag.FlagSet) func(*env, []string) error {
		id := fs.String("id", "", "ack the delivery of message `ID` instead of a receipt")
		return func(e *env, args []string) error {
			return runSettle(e, args, *id, func(q queue.AckQueue, r queue.Receipt) error { return q.Ack(r) },
				func(q queue.AckQueue, id string) error { return q.AckID(id) }, "acked")
		}
	},
}

var nackCmd = &command{
	name:  "nack",
	args:  "[--delay D] DIR RECEIPT | --id ID DIR",
	short: "give a delivery back by its receipt",
	long: `Nack gives back the message of the delivery RECEIPT (or of message --id)
to the queue in DIR: ready again after --delay. walq does not know the
application's MaxDeliveries and dead-letters nothing itself: a message
past that limit goes to the dead set when the application would next
deliver it. Exit status 5 if the lease was lost.`,
	example: `walq nack /var/lib/app/jobs 17.42.1796129517081275306
walq nack --delay 1m /var/lib/app/jobs 17.42.1796129517081275306`,
	exits:        []int{exitOK, exitFailure, exitCorrupt, exitLocked, exitNotFound},
	serverWrites: true,
	nargs:        [2]int{1, 2},
	setup: func(fs *flag.FlagSet) func(*env, []string) error {
		id := fs.String("id", "", "nack the delivery of message `ID` instead of a receipt")
		delay := fs.Duration("delay", 0, "ready again after `D`")
		return func(e *env, args []string) error {
			return runSettle(e, args, *id, func(q queue.AckQueue, r queue.Receipt) error { return q.Nack(r, *delay) },
				func(q queue.AckQueue, id string) error { return q.NackID(id, *delay) }, "nacked")
		}
	},
}

var extendCmd = &command{
	name:  "extend",
	args:  "[--for D] DIR RECEIPT | --id ID DIR",
	short: "give a delivery more time by its receipt",
	long: `Extend sets the lease of the delivery RECEIPT (or of the delivery of
message --id) in the queue in DIR to run out --for from now, so that a
consumer still at work keeps its message. Exit status 5 if the lease was
already lost.`,
	example: `walq extend /var/lib/app/jobs 17.42.1796129517081275306
walq extend --for 10m --id order-1234 /var/lib/app/jobs`,
	exits:        []int{exitOK, exitFailure, exitCorrupt, exitLocked, exitNotFound},
	serverWrites: true,
	nargs:        [2]int{1, 2},
	setup: func(fs *flag.FlagSet) func(*env, []string) error {
		id := fs.String("id", "", "extend the delivery of message `ID` instead of a receipt")
		d := fs.Duration("for", 30*time.Second, "the lease runs out `D` from now")
		return func(e *env, args []string) error {
			if *d <= 0 {
				return usagef("--for must be positive, not %v", *d)
			}
			return runSettle(e, args, *id, func(q queue.AckQueue, r queue.Receipt) error { return q.Extend(r, *d) },
				func(q queue.AckQueue, id string) error { return q.ExtendID(id, *d) }, "extended")
		}
	},
}

// runSettle acks, nacks or extends a delivery named by a receipt argument
// or --id.
func runSettle(e *env, args []string, id string, byReceipt func(queue.AckQueue, queue.Receipt) error,
	byID func(queue.AckQueue, string) error, verb string) (err error) {
	if (id == "") == (len(args) == 1) {
		return usagef("name the delivery by RECEIPT or by --id, not both")
	}
	var r queue.Receipt
	if id == "" {
		if r, err = queue.ParseReceipt(args[1]); err != nil {
			return usagef("%v", err)
		}
	}
	q, err := openAck(e, args[0], nil, false)
	if err != nil {
		return err
	}
	defer closeAny(q, &err)
	if id != "" {
		err = byID(q, id)
	} else {
		err = byReceipt(q, r)
	}
	if err == nil {
		fmt.Fprintln(e.stdout, verb)
	}
	return err
}
