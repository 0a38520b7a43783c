package cli

import (
	"flag"
	"fmt"

	"github.com/walq/walq/queue"
)

var compactCmd = &command{
	name:  "compact",
	args:  "DIR",
	short: "snapshot and truncate the log now",
	long: `Compact takes a snapshot of the queue in DIR (an ack, sorted or windowed
queue) now and removes the log segments that neither the snapshot nor a
live message or value needs. When the log still holds more than twice the
live bytes plus two 4 MiB segments (the segment size walq opens a queue
with, whatever its own process uses), the messages or values that pin it
are copied forward first and the log is cut again. A queue compacts by
itself as its log grows; this is for an operator who wants the disk back
now.

A message or value whose record fails its checks (a damaged checksum, or
the record of another message) is never copied: the compaction copies only
what lies below it, cuts the log there, and exits 2 (corrupt), naming its
LSN; what it copied and cut is kept. 'walq repair DIR' drops the damage,
after which compactions succeed again.`,
	example: `walq compact /var/lib/app/jobs`,
	exits:   []int{exitOK, exitFailure, exitCorrupt, exitLocked},
	nargs:   [2]int{1, 1},
	dirOnly: true,
	setup: func(fs *flag.FlagSet) func(*env, []string) error {
		return func(e *env, args []string) error { return runCompact(e, args[0]) }
	},
}

// compactable is a queue walq compact works on.
type compactable interface {
	stats() queue.Stats
	compact() error
	close() error
}

// ackQueue is an ack queue as a compactable.
type ackQueue struct{ q *queue.Queue }

func (a ackQueue) stats() queue.Stats { return a.q.Stats() }
func (a ackQueue) compact() error     { return a.q.Compact() }
func (a ackQueue) close() error       { return a.q.Close() }

// openCompactable opens the queue in dir to compact it, and names what it
// holds: "message" or "value".
func openCompactable(e *env, dir string) (compactable, string, error) {
	sv, err := sortedDir(e, dir, false)
	if err != nil || sv != nil {
		return sv, "value", err
	}
	q, err := openQueue(e, dir, nil)
	if err != nil {
		return nil, "", err
	}
	return ackQueue{q}, "message", nil
}

func runCompact(e *env, dir string) (err error) {
	q, noun, err := openCompactable(e, dir)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := q.close(); err == nil && cerr != nil {
			err = cerr
		}
	}()
	before := q.stats()
	sp := e.spinner("compacting " + dir)
	err = q.compact()
	sp.done()
	if err != nil {
		return err
	}
	after := q.stats()
	fmt.Fprintf(e.stdout, "log before: %s in %s (live %s)\n", sizeText(before.LogBytes), plural(len(before.Segments), "segment"), sizeText(before.LiveBytes))
	fmt.Fprintf(e.stdout, "log after:  %s in %s (live %s), snapshot at LSN %d, %s moved forward\n",
		sizeText(after.LogBytes), plural(len(after.Segments), "segment"), sizeText(after.LiveBytes), after.SnapshotLSN,
		plural(int(after.Moved-before.Moved), noun))
	return nil
}
