package cli

import (
	"flag"
	"fmt"
)

var compactCmd = &command{
	name:  "compact",
	args:  "DIR",
	short: "snapshot and truncate the log now",
	long: `Compact takes a snapshot of the queue in DIR now and removes the log
segments that neither the snapshot nor a live message needs. When the log
still holds more than twice the live bytes plus two 4 MiB segments (the
segment size walq opens a queue with, whatever its own process uses), the
messages that pin it are copied forward first and the log is cut again.
A queue compacts by itself as its log grows; this is for an operator who
wants the disk back now.`,
	example: `walq compact /var/lib/app/jobs`,
	exits:   []int{exitOK, exitFailure, exitCorrupt, exitLocked},
	nargs:   [2]int{1, 1},
	setup: func(fs *flag.FlagSet) func(*env, []string) error {
		return func(e *env, args []string) error { return runCompact(e, args[0]) }
	},
}

func runCompact(e *env, dir string) (err error) {
	q, err := openQueue(e, dir, nil)
	if err != nil {
		return err
	}
	defer closeQueue(q, &err)
	before := q.Stats()
	sp := e.spinner("compacting " + dir)
	err = q.Compact()
	sp.done()
	if err != nil {
		return err
	}
	after := q.Stats()
	fmt.Fprintf(e.stdout, "log before: %s in %s (live %s)\n", sizeText(before.LogBytes), plural(len(before.Segments), "segment"), sizeText(before.LiveBytes))
	fmt.Fprintf(e.stdout, "log after:  %s in %s (live %s), snapshot at LSN %d, %s moved forward\n",
		sizeText(after.LogBytes), plural(len(after.Segments), "segment"), sizeText(after.LiveBytes), after.SnapshotLSN,
		plural(int(after.Moved-before.Moved), "message"))
	return nil
}
