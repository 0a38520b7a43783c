package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/walq/walq/queue"
)

// The demo's settings: a short ack timeout so that the redelivery shows
// within a second, and small segments so that the log has several.
const (
	demoAckTimeout  = time.Second
	demoSegmentSize = 16 << 10
)

var demoCmd = &command{
	name:  "demo",
	args:  "[--keep] [--redis URL]",
	short: "the ack-queue scenario end to end, with a crash and its recovery",
	long: `Demo runs walq's ack queue end to end in a temporary directory and says
what happens at each step:

  1. a producer enqueues three orders; a consumer takes one and acks it;
  2. a consumer takes an order and dies without acking; after the ack
     timeout (1s) the same order is delivered again (delivery 2), and the
     dead consumer's late ack is refused;
  3. a child process enqueues under SyncAlways and reports every
     acknowledged enqueue over a pipe; the demo kills it with SIGKILL
     mid-stream, reopens the queue, shows what recovery did, drains the
     queue and checks that every acknowledged message is there.

It exits with status 1 if any acknowledged message was lost.

With --redis URL (walq-redis, the build with the Redis backend), steps 1
and 2 run the same consumer code on a new queue in that server instead,
named walq-demo-<time>; step 3 is the embedded queue's own recovery and is
left out (on Redis, what survives a crash is what the server's AOF kept).`,
	example: `go run ./cmd/walq demo
walq demo --keep   # keep the directory to look at with walq stats, dump, verify
walq-redis demo --redis redis://localhost:6379/0`,
	exits:     []int{exitOK, exitFailure},
	exitNotes: map[int]string{exitOK: "success: nothing acknowledged was lost", exitFailure: "an acknowledged message was lost, or a failure"},
	nargs:     [2]int{0, 0},
	setup: func(fs *flag.FlagSet) func(*env, []string) error {
		keep := fs.Bool("keep", false, "keep the queue directory instead of removing it")
		server := fs.String("redis", "", "run steps 1 and 2 on the Redis server at `URL` (walq-redis only)")
		return func(e *env, _ []string) error {
			if *server != "" {
				return runDemoOn(e, *server) // engine.go
			}
			return runDemo(e, *keep)
		}
	},
}

// demo is one run of the demo.
type demo struct {
	e     *env
	dir   string    // the queue directory, or a queue's URL
	start time.Time // when the demo began, for the timestamps it prints
	// stored says when an Enqueue returns; "" means the embedded queue's
	// "fsynced".
	stored string
}

func runDemo(e *env, keep bool) (err error) {
	dir, err := os.MkdirTemp("", "walq-demo-")
	if err != nil {
		return err
	}
	d := &demo{e: e, dir: dir, start: time.Now()}
	defer func() {
		if keep || err != nil {
			fmt.Fprintf(e.stdout, "\nThe queue is still in %s: try walq stats, dump or verify on it.\n", dir)
			return
		}
		if rerr := os.RemoveAll(dir); rerr != nil {
			err = rerr
		}
	}()
	fmt.Fprintf(e.stdout, "walq demo: a durable ack queue in %s\n", dir)
	if err := d.ackAndRedeliver(); err != nil {
		return err
	}
	return d.crash()
}

// say prints one line of the story, stamped with the time since the start.
func (d *demo) say(format string, args ...any) {
	fmt.Fprintf(d.e.stdout, "  [%5.2fs] %s\n", time.Since(d.start).Seconds(), fmt.Sprintf(format, args...))
}

// title starts a step of the story.
func (d *demo) title(s string) { fmt.Fprintf(d.e.stdout, "\n%s\n", s) }

// options are the queue options of every open in the demo.
func (d *demo) options() *queue.Options {
	return &queue.Options{AckTimeout: demoAckTimeout, SegmentSize: demoSegmentSize, Sync: queue.SyncAlways}
}

// ackAndRedeliver runs steps 1 and 2: enqueue, consume, ack; a consumer
// that dies and the redelivery of its message.
func (d *demo) ackAndRedeliver() (err error) {
	q, err := queue.Open(d.dir, d.options())
	if err != nil {
		return err
	}
	defer closeQueue(q, &err)
	return d.consumers(q)
}

// consumers runs steps 1 and 2 on q, of either engine: the same code.
func (d *demo) consumers(q queue.AckQueue) error {
	d.title("1. Enqueue, consume, ack")
	if err := d.enqueueOrders(q); err != nil {
		return err
	}
	if err := d.consumeAndAck(q, "A"); err != nil {
		return err
	}
	d.title("2. A consumer that dies before it acks")
	return d.redeliver(q)
}

// enqueueOrders enqueues order-1 to order-3.
func (d *demo) enqueueOrders(q queue.AckQueue) error {
	for i, drink := range []string{"espresso", "latte", "flat white"} {
		id := fmt.Sprintf("order-%d", i+1)
		if _, err := q.Enqueue(context.Background(), []byte(drink), queue.WithID(id)); err != nil {
			return err
		}
	}
	stored := d.stored
	if stored == "" {
		stored = "each fsynced before Enqueue returned"
	}
	d.say("producer enqueued order-1, order-2, order-3 (%s)", stored)
	return nil
}

// consumeAndAck has consumer who take the next message and ack it.
func (d *demo) consumeAndAck(q queue.AckQueue, who string) error {
	m, err := q.TryDequeue()
	if err != nil {
		return err
	}
	d.say("consumer %s got %s %q (delivery %d, receipt %s)", who, m.ID, m.Payload, m.Deliveries, m.Receipt)
	if err := m.Ack(); err != nil {
		return err
	}
	d.say("consumer %s acked %s: it is gone for good", who, m.ID)
	return nil
}

// redeliver shows a consumer dying with a lease, the redelivery after the
// ack timeout, and the refusal of the dead consumer's late ack.
func (d *demo) redeliver(q queue.AckQueue) error {
	lost, err := q.TryDequeue()
	if err != nil {
		return err
	}
	d.say("consumer B got %s (delivery %d) and died without acking", lost.ID, lost.Deliveries)
	if err := d.consumeAndAck(q, "C"); err != nil {
		return err
	}
	d.say("consumer C waits for the next message; %s is leased to B for %v", lost.ID, demoAckTimeout)
	ctx, cancel := context.WithTimeout(context.Background(), 10*demoAckTimeout)
	defer cancel()
	waited := time.Now()
	m, err := q.Dequeue(ctx)
	if err != nil {
		return err
	}
	d.say("B's lease ran out: consumer C got %s again after %.1fs (delivery %d, same id, same enqueue time: %v)",
		m.ID, time.Since(waited).Seconds(), m.Deliveries, m.EnqueuedAt.Equal(lost.EnqueuedAt))
	if m.ID != lost.ID || m.Deliveries != 2 {
		return fmt.Errorf("demo: expected %s on delivery 2, got %s on delivery %d", lost.ID, m.ID, m.Deliveries)
	}
	if err := m.Ack(); err != nil {
		return err
	}
	d.say("consumer C acked %s", m.ID)
	err = lost.Ack()
	if !errors.Is(err, queue.ErrLeaseLost) {
		return fmt.Errorf("demo: the late ack of a lost lease returned %v, not ErrLeaseLost", err)
	}
	d.say("B's late ack with its old receipt is refused: %v", err)
	return nil
}
