package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/walq/walq/queue"
)

// Engine opens ack queues that live on a server, named by a URL where the
// commands take DIR.
type Engine interface {
	// Owns reports whether target names a queue of the engine (a URL it
	// knows) rather than a directory.
	Owns(target string) bool
	// Form describes the targets it owns, for the help texts
	// ("redis://host:port[/db]/NAME").
	Form() string
	// Open opens the ack queue target names. o.Inspect is set for the
	// commands that only read (stats, dlq list and show): the queue it
	// returns changes nothing, by call or in the background (it ends no
	// expired lease, makes no delayed message ready), and the engine
	// skips what only matters for writes, such as its durability checks.
	// The queue of a command that changes it changes nothing but what
	// its calls ask: in the background it ends no expired lease (the
	// application's MaxDeliveries, which the command does not know, may
	// dead-letter its message), unless o.Expire.
	Open(ctx context.Context, target string, o EngineOptions) (queue.AckQueue, error)
}

// EngineOptions are what a command asks of the queue it opens.
type EngineOptions struct {
	AckTimeout time.Duration // the lease of a dequeue; 0: the engine's default
	Inspect    bool          // the command only reads
	// Expire makes the queue end expired leases in the background, as an
	// application's does: only for a queue the command made and consumes
	// itself (the demo's).
	Expire bool
	// MaxDeliveries is the limit of the queue's calls (requeue-expired's,
	// given by its operator): 0, the command dead-letters nothing.
	MaxDeliveries int
	// TrustServer is --trust-server: the operator vouches for the
	// server's configuration, and the engine skips its check of it (which
	// needs a user that may read it).
	TrustServer bool
}

// engineQueue opens target with the engine when the engine owns it; ok is
// false when target is a directory.
func engineQueue(e *env, target string, o EngineOptions) (q queue.AckQueue, ok bool, err error) {
	if e.engine == nil || !e.engine.Owns(target) {
		return nil, false, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	o.TrustServer = e.trustServer
	q, err = e.engine.Open(ctx, target, o)
	if err != nil {
		return nil, true, fmt.Errorf("open %s: %w", Redacted(target), err)
	}
	return q, true, nil
}

// openAck opens the ack queue target names: with the engine, or the
// directory as openQueue (openAny when create) does.
func openAck(e *env, target string, o *queue.Options, create bool) (queue.AckQueue, error) {
	eo := EngineOptions{}
	if o != nil {
		eo.AckTimeout = o.AckTimeout
	}
	if q, ok, err := engineQueue(e, target, eo); ok {
		return q, err
	}
	if create {
		return openAny(e, target, o)
	}
	return openQueue(e, target, o)
}

// closeAny closes c, keeping the first error.
func closeAny(c io.Closer, err *error) {
	if cerr := c.Close(); *err == nil && cerr != nil {
		*err = cerr
	}
}

// owns reports whether target names a queue of the engine, not a
// directory.
func (e *env) owns(target string) bool { return e.engine != nil && e.engine.Owns(target) }

// inspectAck opens target to read it: with the engine, or the directory
// read-only as inspectQueue does.
func inspectAck(e *env, target string) (queue.AckQueue, error) {
	if q, ok, err := engineQueue(e, target, EngineOptions{Inspect: true}); ok {
		return q, err
	}
	return inspectQueue(e, target)
}

// sortedTarget is sortedDir for a directory, and engineSorted for a
// queue of the engine.
func sortedTarget(e *env, target string, readOnly bool) (sortedView, error) {
	return sortedTargetWith(e, target, EngineOptions{Inspect: readOnly}, sortedOptions(readOnly))
}

// sortedTargetWith is sortedTarget opening a queue of the engine with eo,
// a directory with o.
func sortedTargetWith(e *env, target string, eo EngineOptions, o queue.Options) (sortedView, error) {
	if e.owns(target) {
		return engineSorted(e, target, eo)
	}
	return sortedDirWith(e, target, o)
}

// engineStatsJSON is stats --json for a queue of the engine: what it is,
// the counts and counters; a server's queue has no files, log positions
// or format version.
type engineStatsJSON struct {
	Queue string `json:"queue"`
	countsJSON
	Totals  totalsJSON  `json:"totals"`
	Kind    string      `json:"kind"`               // ack, sorted, windowed
	SortKey string      `json:"sort_key,omitempty"` // a sorted queue's sort key type
	Sorted  *sortedJSON `json:"sorted,omitempty"`   // sorted and windowed queues
}

// runEngineStats prints the counts and counters of a queue of the engine.
func runEngineStats(e *env, target string, asJSON bool) (err error) {
	sv, err := engineSorted(e, target, EngineOptions{Inspect: true})
	if err != nil {
		return err
	}
	if sv != nil {
		defer closeView(sv, &err)
		return printEngineSortedStats(e, target, sv, asJSON)
	}
	q, err := inspectAck(e, target)
	if err != nil {
		return err
	}
	defer closeAny(q, &err)
	s, err := engineStats(q)
	if err != nil {
		return err
	}
	r := &statsReport{Dir: Redacted(target), countsJSON: newCounts(s), Totals: newTotals(s)}
	if asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(engineStatsJSON{Queue: r.Dir, countsJSON: r.countsJSON, Totals: r.Totals, Kind: "ack"}); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(e.stdout, "queue %s\n", r.Dir)
		printCounts(e.stdout, r)
		printTotals(e.stdout, r)
		printUnchecked(e.stdout, r.CountsError)
	}
	return statsUnread(s, false) // stats.go
}

// printEngineSortedStats prints the figures of a sorted or windowed queue
// of the engine, as printStats prints a directory's, less its files.
func printEngineSortedStats(e *env, target string, sv sortedView, asJSON bool) error {
	s, err := sv.readStats()
	if err != nil {
		return err
	}
	id := sv.identity()
	r := &statsReport{Dir: Redacted(target), countsJSON: newCounts(s), Totals: newTotals(s), Kind: id.Kind.String(),
		SortKey: id.SortKey, Sorted: newSorted(s)}
	if asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(engineStatsJSON{Queue: r.Dir, countsJSON: r.countsJSON, Totals: r.Totals, Kind: r.Kind,
			SortKey: r.SortKey, Sorted: r.Sorted}); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(e.stdout, "queue %s\n  kind        %s\n", r.Dir, kindName(r))
		printSortedCounts(e.stdout, r)
		printTotals(e.stdout, r)
		printUnchecked(e.stdout, r.CountsError)
	}
	return statsUnread(s, true) // stats.go
}

// runDemoOn runs the demo's steps 1 and 2 on a new queue of the engine in
// the server that url names.
func runDemoOn(e *env, url string) (err error) {
	if e.engine == nil {
		return usagef("this walq links no Redis backend: --redis needs walq-redis (go install github.com/walq/walq/redisq/cmd/walq-redis@latest)")
	}
	base, query, hasQuery := strings.Cut(url, "?") // the query is the server's: the name goes before it
	target := strings.TrimSuffix(base, "/") + "/walq-demo-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	if hasQuery {
		target += "?" + query
	}
	if !e.engine.Owns(target) {
		return usagef("--redis %q is not a URL walq-redis knows (redis://host:port/db)", Redacted(url))
	}
	q, _, err := engineQueue(e, target, EngineOptions{AckTimeout: demoAckTimeout, Expire: true})
	if err != nil {
		return err
	}
	defer closeAny(q, &err)
	d := &demo{e: e, dir: target, start: time.Now(),
		stored: "each run by the server before Enqueue returned; fsynced if it runs appendfsync always"}
	fmt.Fprintf(e.stdout, "walq demo: the ack queue %s, on the Redis server, driven by the same code as the embedded one\n", Redacted(target))
	if err := d.consumers(q); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "\nStep 3, a crash and the recovery of a queue directory, is the embedded queue's.\n"+
		"The queue stays on the server, empty: walq-redis stats %s\n", Redacted(target))
	return nil
}

// engineStats returns q's stats, with the error of an engine that
// reports one (Stats alone cannot).
func engineStats(q interface{ Stats() queue.Stats }) (queue.Stats, error) {
	type withContext interface {
		StatsContext(ctx context.Context) (queue.Stats, error)
	}
	if sc, ok := q.(withContext); ok {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return sc.StatsContext(ctx)
	}
	return q.Stats(), nil
}
