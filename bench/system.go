package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Sentinels shared by the adapters.
var (
	// errNoConsumer is returned by an append-only lower bound asked for a
	// consumer.
	errNoConsumer = errors.New("bench: system has no consumer")
	// errUnknownSystem is returned when -systems names nothing known.
	errUnknownSystem = errors.New("bench: unknown system")
)

// Kind tells what a system can do.
type Kind uint8

const (
	// KindQueue systems enqueue, dequeue and ack.
	KindQueue Kind = iota
	// KindLog systems only append: they are the lower bounds a durable
	// enqueue cannot beat on this disk.
	KindLog
)

// Hint tells an adapter how it will be driven, so that it can tune itself as
// its documentation advises (bbolt's db.Batch wants to know how many callers
// share a commit).
type Hint struct {
	Producers int // goroutines calling Enqueue at once
	Consumers int // goroutines calling Dequeue at once
	Payload   int // payload bytes per message
}

// System is one library in one configuration.
type System struct {
	Name    string // family/mode, unique: "walq/always", "dque/turbo"
	Family  string // "walq", "dque", "bbolt", "jetstream", "fsync", "tidwall"
	Mode    string // the sync mode or variant: "always", "turbo", "batch"
	Kind    Kind
	Durable bool // every Enqueue is on stable storage when it returns
	// Bulk marks the configuration of its family used to load large
	// backlogs (backlog and recovery workloads): the on-disk format is the
	// same in every mode, only the time to load it differs.
	Bulk bool
	// Workloads, when set, are the only workloads the system takes part
	// in: a variant that differs from another system of its family only
	// where those workloads look.
	Workloads []string
	// FIFO is true when the system promises that one producer's messages
	// are delivered in the order they were enqueued.
	FIFO bool
	// Reader names the system of the same family that reads this one's
	// store fastest (same format, no fsync per dequeue), used to verify a
	// store without timing it; "" means the system itself.
	Reader string
	// Config describes, in one line, every setting that differs from the
	// library's defaults and why; it is printed with the results.
	Config func(h Hint) string
	// Open opens or creates the system's store in dir, which it owns.
	Open func(dir string, h Hint) (Queue, error)
}

// Queue is what every workload drives. Enqueue returns once the system
// considers the message stored (durably, when System.Durable).
type Queue interface {
	Enqueue(ctx context.Context, payload []byte) error
	// NewConsumer returns a handle for one consuming goroutine; lower bounds
	// return errNoConsumer.
	NewConsumer() (Consumer, error)
	Close() error
}

// Consumer is one goroutine's view of a queue.
type Consumer interface {
	// Dequeue blocks until a message is ready or ctx ends.
	Dequeue(ctx context.Context) (Delivery, error)
	Close() error
}

// Delivery is one dequeued message.
type Delivery interface {
	Payload() []byte
	Ack() error
}

// scanner is implemented by systems whose stored messages can be read in
// order without consuming them; the durable-enqueue workloads verify with it
// instead of draining, which would cost one more fsync per message.
type scanner interface {
	Scan(fn func(payload []byte) error) error
}

// oneShot is implemented by systems whose consumers prefetch: DequeueOne
// takes a single message without leaving others delivered but unacked.
type oneShot interface {
	DequeueOne(ctx context.Context) (Delivery, error)
}

// settler is implemented by systems whose acks are applied asynchronously;
// Settle returns once every ack sent so far has been applied, so that the
// bytes on disk after a drain are measured fairly.
type settler interface {
	Settle(ctx context.Context) error
}

// flusher is implemented by systems whose Enqueue returns before the
// message is stored; Flush returns once every message enqueued so far is,
// and each producer calls it at the end of its run, inside the timing.
type flusher interface {
	Flush(ctx context.Context) error
}

// allSystems lists every system in the order the table shows them: walq
// first, so that each round starts with the reference.
func allSystems() []System {
	var s []System
	s = append(s, walqSystems()...)
	s = append(s, dqueSystems()...)
	s = append(s, goqiteSystems()...)
	s = append(s, bboltSystems()...)
	s = append(s, jetstreamSystems()...)
	s = append(s, fsyncSystems()...)
	s = append(s, tidwallSystems()...)
	s = append(s, redisSystems()...)
	s = append(s, asynqSystems()...)
	return s
}

// selectSystems keeps the systems named in filter: a comma-separated list of
// full names ("walq/always") or families ("bbolt"). An empty filter keeps all.
func selectSystems(all []System, filter string) ([]System, error) {
	if strings.TrimSpace(filter) == "" {
		return all, nil
	}
	var out []System
	for _, want := range strings.Split(filter, ",") {
		want = strings.TrimSpace(want)
		found := false
		for _, s := range all {
			if s.Name == want || s.Family == want {
				out = appendUnique(out, s)
				found = true
			}
		}
		if !found {
			return nil, fmt.Errorf("%w: %q", errUnknownSystem, want)
		}
	}
	return out, nil
}

func appendUnique(list []System, s System) []System {
	for _, have := range list {
		if have.Name == s.Name {
			return list
		}
	}
	return append(list, s)
}

// reference returns the name of the walq system a system is compared with in
// a workload: walq/always for durable systems, walq/never for the others and
// for the workloads that load stores in bulk.
func reference(s System, workload string) string {
	if s.Durable && !slices.Contains([]string{wBacklog, wRecovery, wSorted, wCrash}, workload) {
		return "walq/always"
	}
	return "walq/never"
}
