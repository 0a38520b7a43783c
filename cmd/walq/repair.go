package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/walq/walq/queue"
)

var repairCmd = &command{
	name:  "repair",
	args:  "[--backup PATH] DIR",
	short: "back the directory up, then cut or skip the damage verify found",
	long: `Repair is the explicit salvage of a damaged queue. It runs verify; if DIR
is clean it does nothing. Otherwise it first copies DIR to a backup
(DIR.bak-<time> unless --backup names another path; the copy is fsynced
before anything else happens), then opens the queue with salvage on: a torn
tail is cut, damaged log entries are skipped, the live messages in the
damaged segments are copied past them and those segments removed. It
prints exactly what was dropped (segment, offset, bytes, entries, LSN
range), compacts, and runs verify again.

The messages in skipped entries are lost; the backup keeps the bytes for
forensics. A corrupt snapshot cannot be salvaged: repair stops, the
directory unchanged. Verify, the backup and the salvage each take the
directory lock on their own, so do not start the queue's owner while
repair runs.`,
	example: `walq repair /var/lib/app/jobs
walq repair --backup /srv/backups/jobs-before-repair /var/lib/app/jobs`,
	exits:     []int{exitOK, exitFailure, exitCorrupt, exitLocked},
	exitNotes: map[int]string{exitOK: "repaired (verify finds it clean) or nothing to repair", exitCorrupt: "damage remains (the output says what)"},
	nargs:     [2]int{1, 1},
	setup: func(fs *flag.FlagSet) func(*env, []string) error {
		backup := fs.String("backup", "", "copy DIR to `PATH` before repairing (default DIR.bak-<time>)")
		return func(e *env, args []string) error { return runRepair(e, filepath.Clean(args[0]), *backup) }
	},
}

func runRepair(e *env, dir, backup string) error {
	if err := checkQueueDir(dir); err != nil {
		return err
	}
	// 1. See what is wrong, changing nothing.
	c, err := queue.Verify(dir)
	if err != nil && !errors.Is(err, queue.ErrCorrupt) {
		return err
	}
	printCheck(e.stdout, dir, c, err)
	if err == nil && c.Log.Torn == nil {
		fmt.Fprint(e.stdout, "result: clean, nothing to repair (no backup made)\n")
		return nil
	}
	if !logDamaged(c) {
		fmt.Fprint(e.stdout, "result: NOT repaired: the damage is not in the log, and only log damage can be cut or skipped\n")
		return fmt.Errorf("%w; %s was not changed", err, dir)
	}
	// 2. Back up the directory before touching it.
	if backup == "" {
		backup = dir + ".bak-" + time.Now().Format("20060102-150405")
	}
	n, err := backupDir(e, dir, backup)
	if err != nil {
		return fmt.Errorf("%w; %s was not changed", err, dir)
	}
	fmt.Fprintf(e.stdout, "backup: copied %s to %s\n", sizeText(n), backup)
	// 3. Salvage and compact.
	if err := salvage(e, dir); err != nil {
		return fmt.Errorf("%w (the backup is %s)", err, backup)
	}
	// 4. Check the result.
	return reverify(e, dir)
}

// salvage opens dir with salvage on, prints what it dropped, and compacts.
func salvage(e *env, dir string) (err error) {
	sp := e.spinner("repairing " + dir)
	q, err := queue.Open(dir, &queue.Options{Salvage: true})
	sp.done()
	if err != nil {
		return err
	}
	defer closeQueue(q, &err)
	printDropped(e.stdout, q.Recovery())
	sp = e.spinner("compacting " + dir)
	err = q.Compact()
	sp.done()
	return err
}

// printDropped prints what a salvaging open cut and skipped.
func printDropped(w io.Writer, r queue.Recovery) {
	if r.Log.Torn != nil {
		fmt.Fprintf(w, "cut torn tail: %s\n", describeDamage(*r.Log.Torn))
	}
	for _, d := range r.Log.Salvaged {
		fmt.Fprintf(w, "skipped: %s\n", describeDamage(d))
	}
	fmt.Fprintf(w, "replayed %d records after snapshot LSN %d", r.Replayed, r.SnapshotLSN)
	if r.Requeued > 0 {
		fmt.Fprintf(w, "; %d leases of the crashed process ready again", r.Requeued)
	}
	if r.Skipped > 0 {
		fmt.Fprintf(w, "; %d records no longer applied and were skipped", r.Skipped)
	}
	fmt.Fprintln(w)
	if r.Rewritten > 0 {
		fmt.Fprintf(w, "rewritten: %d messages copied past the damage (or dropped where their record was lost); damaged segments removed\n", r.Rewritten)
	}
}

// reverify runs verify after the repair and says whether DIR is clean.
func reverify(e *env, dir string) error {
	c, err := queue.Verify(dir)
	if errors.Is(err, queue.ErrCorrupt) {
		for _, d := range c.Log.Salvaged {
			fmt.Fprintf(e.stdout, "still damaged: %s\n", describeDamage(d))
		}
		fmt.Fprint(e.stdout, "result: NOT repaired: damage remains after the salvage\n")
		return fmt.Errorf("after repair: %w", err)
	}
	if err != nil {
		return fmt.Errorf("after repair: %w", err)
	}
	if c.Log.Torn != nil {
		return fmt.Errorf("after repair: torn tail remains: %s", describeDamage(*c.Log.Torn))
	}
	fmt.Fprint(e.stdout, "result: repaired; verify finds it clean\n")
	return nil
}
