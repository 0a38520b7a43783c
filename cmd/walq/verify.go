package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"

	"github.com/walq/walq/queue"
	"github.com/walq/walq/wal"
)

var verifyCmd = &command{
	name:  "verify",
	args:  "DIR",
	short: "check every checksum and the replay, changing nothing",
	long: `Verify checks the queue in DIR without changing anything: the newest
snapshot's checksum, the checksum and order of every log entry, and that
every record after the snapshot replays. It prints every problem with its
segment file and byte offset.

A torn tail (the end of the last segment cut short by a crash) is
repairable: the next open of the queue cuts it by itself, and so does
'walq repair'. Any other damage is corruption: the queue refuses to open
until 'walq repair' skips it.

Verify reads under a shared lock, so it refuses a directory that a queue
has open.`,
	example: `walq verify /var/lib/app/jobs && echo clean`,
	exits:   []int{exitOK, exitFailure, exitCorrupt, exitLocked},
	exitNotes: map[int]string{
		exitOK:      "clean",
		exitFailure: "a torn tail (repairable), or a usage error or failure",
		exitCorrupt: "corrupt: damage other than a torn tail (walq repair skips it)",
	},
	nargs: [2]int{1, 1},
	setup: func(fs *flag.FlagSet) func(*env, []string) error {
		return func(e *env, args []string) error { return runVerify(e, args[0]) }
	},
}

func runVerify(e *env, dir string) error {
	if err := checkQueueDir(dir); err != nil {
		return err
	}
	sp := e.spinner("verifying " + dir)
	c, err := queue.Verify(dir)
	sp.done()
	if err != nil && !errors.Is(err, queue.ErrCorrupt) {
		return err
	}
	printCheck(e.stdout, dir, c, err)
	if err != nil {
		if !logDamaged(c) {
			return withExit(exitCorrupt, fmt.Errorf("%s is corrupt outside the log, which walq repair cannot skip", dir))
		}
		return withExit(exitCorrupt, fmt.Errorf("%s is corrupt; 'walq repair %s' skips the damage after a backup", dir, dir))
	}
	if c.Log.Torn != nil {
		fmt.Fprintf(e.stdout, "result: torn tail, repairable: the next open cuts it, or run 'walq repair %s'\n", dir)
		return withExit(exitFailure, fmt.Errorf("%s has a torn tail", dir))
	}
	fmt.Fprint(e.stdout, "result: clean\n")
	return nil
}

// printCheck prints what Verify looked at and every problem it found,
// verr being its error.
func printCheck(w io.Writer, dir string, c queue.Check, verr error) {
	fmt.Fprintf(w, "verify %s\n", dir)
	if verr != nil && !logDamaged(c) {
		fmt.Fprintf(w, "  corrupt   %v\n", verr)
		return
	}
	if s := c.Snapshot; s != nil {
		fmt.Fprintf(w, "  snapshot  %s: LSN %d, %s, checksum ok\n", filepath.Base(s.Path), s.LSN, sizeText(s.Bytes))
		fmt.Fprintf(w, "  log       %d records replayed after the snapshot\n", c.Records)
	} else {
		fmt.Fprintf(w, "  snapshot  none\n  log       %d records replayed\n", c.Records)
	}
	if c.Log.Torn != nil {
		fmt.Fprintf(w, "  torn tail %s\n", describeDamage(*c.Log.Torn))
	}
	for _, d := range c.Log.Salvaged {
		fmt.Fprintf(w, "  damaged   %s\n", describeDamage(d))
	}
	if verr != nil {
		fmt.Fprintf(w, "  corrupt   %v\n", verr)
	}
}

// logDamaged reports whether Verify found damage in the log, which is
// what a salvage can cut or skip.
func logDamaged(c queue.Check) bool {
	return c.Log.Torn != nil || len(c.Log.Salvaged) > 0
}

// describeDamage says where damage is and what it covers.
func describeDamage(d wal.Damage) string {
	s := fmt.Sprintf("segment %s offset %d: %d bytes", d.Segment, d.Offset, d.Bytes)
	switch {
	case d.Entries == 1:
		s += ", 1 entry"
	case d.Entries > 1:
		s += fmt.Sprintf(", %d entries", d.Entries)
	}
	switch {
	case d.FirstLSN != 0 && d.LastLSN > d.FirstLSN:
		s += fmt.Sprintf(", LSN %d-%d", d.FirstLSN, d.LastLSN)
	case d.FirstLSN != 0:
		s += fmt.Sprintf(", LSN %d", d.FirstLSN)
	}
	if d.Reason != "" {
		s += " (" + d.Reason + ")"
	}
	return s
}
