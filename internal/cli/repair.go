package cli

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/walq/walq/internal/twin"
	"github.com/walq/walq/queue"
)

var repairCmd = &command{
	name:  "repair",
	args:  "[--json] [--backup PATH] [--segment-size BYTES] DIR",
	short: "back the directory up, then drop what damage lost",
	long: `Repair is the explicit salvage of a damaged queue. It holds the directory
lock from start to end. It runs the checks of verify; if DIR is clean it
does nothing. Otherwise it first copies DIR to a backup (DIR.bak-<time>
next to DIR unless --backup names another path, which must not exist; the
copy is made as PATH.partial, fsynced, and renamed to PATH before anything
else happens (a PATH made meanwhile is refused, not replaced; only on
Linux, on a file system with renameat2's RENAME_NOREPLACE, is an empty
directory made at PATH just before the rename refused too),
so that a repair killed during its backup leaves only PATH.partial, which
a later run with the same --backup refuses until it is removed, and a
later run with the default backup names, to be removed; a copy
that fails, on a full disk say, is removed and DIR is left unchanged),
then opens the queue with salvage on,
keeping every acked id and dead-lettering no message (as every command
that changes a queue: it does not know the application's DedupWindow and
MaxDeliveries): a torn tail is cut, damaged log entries are skipped, a damaged or missing snapshot is rebuilt
by replaying the log (what the log no longer holds is lost), the live
messages in damaged segments are copied past them and those segments
removed, and messages whose records were lost, or are another's, are
dropped. It prints exactly what was lost (LSN ranges, and the sequence
and id of each dropped message; a sorted or windowed queue's dropped
value is named by its sequence and key), compacts, and runs the checks
again: it succeeds when the queue then opens clean.

The lost messages are gone; the backup keeps the bytes for forensics. A
file in the log directory that walq did not write (it only has a segment's
name, a tidwall/wal END file, or a START file without a valid entry) is
never changed: repair stops and names it (END and START files before any
backup). So is walq's own NAME.FRONT truncation marker from a later moment
than the snapshot (see 'walq help verify'): repair refuses it before any
backup, as its salvage does, since finishing the truncation would lose
the records the snapshot needs; move it out of the log directory instead.

A torn roll that only the queue's segment size tells from missing
segments (see 'walq help verify') is refused, before any backup, unless
--segment-size gives the application's Options.SegmentSize (4MiB when it
sets none); given it, repair cuts a torn roll as the application's open
does, and refuses missing segments as damage it cannot bound. A size
larger than the application's lets missing segments pass for a torn roll.

With --json it prints one JSON object: dir, before, backup, repaired,
lost_lsns, dropped, after and result ("clean", "repaired" or "corrupt").
Each of dropped has seq and id: a message's id, or a sorted or windowed
queue's value's key. An id that is not valid UTF-8 is printed in base64
(standard, padded) in id_base64 instead of id.`,
	example: `walq repair /var/lib/app/jobs
walq repair --backup /srv/backups/jobs-before-repair /var/lib/app/jobs`,
	exits: []int{exitOK, exitFailure, exitCorrupt, exitLocked},
	exitNotes: map[int]string{
		exitOK:      "repaired (the queue opens clean), or nothing to repair",
		exitCorrupt: "damage remains (the output says what)",
	},
	nargs:   [2]int{1, 1},
	dirOnly: true,
	setup: func(fs *flag.FlagSet) func(*env, []string) error {
		backup := fs.String("backup", "", "copy DIR to `PATH` before repairing (default DIR.bak-<time>)")
		asJSON := fs.Bool("json", false, "print one JSON object")
		segSize := segmentSizeFlag(fs)
		return func(e *env, args []string) error {
			if err := checkQueueDir(args[0]); err != nil {
				return err // as given: cleaned, a URL's "//" would be "/", which Redacted does not read as one
			}
			return runRepair(e, filepath.Clean(args[0]), *backup, segSize.n, *asJSON)
		}
	},
}

func runRepair(e *env, dir, backup string, segSize int64, asJSON bool) error {
	if err := checkQueueDir(dir); err != nil {
		return err
	}
	if backup == "" {
		var err error
		if backup, err = defaultBackup(dir); err != nil {
			return err
		}
		noteUnfinishedBackups(e.stderr, backup)
	}
	backup = filepath.Clean(backup) // the name backupDir gives the copy: "bak/" is "bak"

	var copied int64 = -1 // bytes backed up; -1 when no backup was made
	sp := e.spinner("repairing " + dir)
	rep, err := queue.Repair(dir, &queue.RepairOptions{Options: ownerOptions(&queue.Options{SegmentSize: segSize}), Backup: func() error {
		n, err := backupDir(e, dir, backup)
		if err == nil {
			copied = n
		}
		return err
	}})
	sp.done()
	if err != nil && copied >= 0 && diskFull(err) {
		err = fmt.Errorf("%w: %s's disk is full; free space on it and run repair again", err, dir)
	}
	if copied < 0 {
		backup = ""
		if err != nil && !errors.Is(err, queue.ErrCorrupt) {
			return err // locked, or the backup failed: nothing changed
		}
	}
	if asJSON {
		if jerr := json.NewEncoder(e.stdout).Encode(toRepairJSON(dir, backup, rep, err)); jerr != nil {
			return jerr
		}
	} else {
		id, _ := queue.ReadIdentity(dir) // names a dropped entry; an unreadable one leaves the kind unknown (0)
		printRepair(e.stdout, dir, backup, copied, rep, id.Kind, err)
	}
	if err != nil && backup != "" {
		return fmt.Errorf("%w (the backup is %s)", err, backup)
	}
	return err
}

// diskFull reports whether err says the disk (or the user's quota) is
// full.
func diskFull(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// defaultBackup returns the default backup path of dir: DIR.bak-<time>
// next to it, named from its absolute path, so that a DIR of "." or ".."
// is backed up beside the directory rather than inside it.
func defaultBackup(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("backup path of %s: %w", dir, err)
	}
	return abs + backupInfix + time.Now().Format("20060102-150405"), nil
}

// backupInfix joins a queue directory's name and the time in the name of
// its default backup.
const backupInfix = ".bak-"

// noteUnfinishedBackups names the copies that repairs killed during their
// default backup left beside the queue directory (DIR.bak-<time>.partial,
// backup being this run's default): each is a partial copy, of no use,
// that holds disk space, and no later run with a default backup, named by
// another time, would otherwise see it.
func noteUnfinishedBackups(w io.Writer, backup string) {
	parent, base := filepath.Split(backup)
	prefix := base[:strings.LastIndex(base, backupInfix)+len(backupInfix)] // "DIR.bak-"
	des, err := os.ReadDir(parent)
	if err != nil {
		fmt.Fprintf(w, "walq: note: looking for unfinished backups in %s: %v\n", parent, err)
		return
	}
	for _, de := range des {
		if n := de.Name(); strings.HasPrefix(n, prefix) && strings.HasSuffix(n, partialSuffix) {
			fmt.Fprintf(w, "walq: note: %s is left by a repair that did not finish its backup: a partial copy, not a backup; remove it to free its space\n", filepath.Join(parent, n))
		}
	}
}

// printRepair prints what repair found, lost and left; kind is the
// queue's, which names what a dropped entry is.
func printRepair(w io.Writer, dir, backup string, copied int64, rep queue.RepairReport, kind queue.Kind, err error) {
	printCheck(w, dir, rep.Before)
	switch {
	case err == nil && rep.Before.Clean():
		fmt.Fprint(w, "result: clean, nothing to repair (no backup made)\n")
		return
	case backup != "":
		fmt.Fprintf(w, "backup: copied %s to %s\n", sizeText(copied), backup)
	}
	if rep.Repaired {
		printLost(w, rep, kind)
	}
	switch {
	case err == nil:
		fmt.Fprint(w, "result: repaired; verify finds it clean and the queue opens\n")
	case rep.Repaired:
		printCheck(w, dir, rep.After)
		fmt.Fprintf(w, "result: NOT repaired: damage remains after the salvage\n")
	default:
		fmt.Fprintf(w, "result: NOT repaired: %v\n", err)
	}
}

// printLost prints what the salvage cut, skipped, dropped and rewrote, in
// the words of a queue of kind.
func printLost(w io.Writer, rep queue.RepairReport, kind queue.Kind) {
	r := rep.Recovery
	if r.Log.Torn != nil {
		fmt.Fprintf(w, "cut torn tail: %s\n", describeDamage(*r.Log.Torn))
	}
	for _, d := range r.Log.Salvaged {
		fmt.Fprintf(w, "skipped: %s\n", describeDamage(d))
	}
	if s := r.SnapshotLost; s.Path != "" && r.SnapshotLSN != 0 {
		fmt.Fprintf(w, "snapshot set aside: %s (damaged); the state was rebuilt from the older snapshot at LSN %d and the log\n",
			s.Path, r.SnapshotLSN)
	} else if s.Path != "" {
		fmt.Fprintf(w, "snapshot set aside: %s (damaged); the state was rebuilt from the log\n", s.Path)
	}
	if r.LostBefore > 1 {
		fmt.Fprintf(w, "lost: the log starts at LSN %d; what the snapshot needed before it is gone\n", r.LostBefore)
	}
	for _, l := range rep.LostLSNs() {
		fmt.Fprintf(w, "lost LSNs: %s\n", lsnRange(l))
	}
	for _, m := range r.Dropped {
		fmt.Fprintln(w, droppedLine(kind, m))
	}
	fmt.Fprintf(w, "replayed %s after snapshot LSN %d", plural(r.Replayed, "record"), r.SnapshotLSN)
	if r.Requeued > 0 {
		fmt.Fprintf(w, "; %s ready again", plural(r.Requeued, "lease"))
	}
	if r.Skipped == 1 {
		fmt.Fprint(w, "; 1 record no longer applied and was skipped")
	} else if r.Skipped > 1 {
		fmt.Fprintf(w, "; %d records no longer applied and were skipped", r.Skipped)
	}
	fmt.Fprintln(w)
	if r.Rewritten > 0 {
		fmt.Fprintln(w, rewrittenLine(kind, r.Rewritten))
	}
}

// rewrittenLine counts the n entries a salvage copied past the damage as a
// queue of kind calls them: an ack queue's messages, a sorted or windowed
// queue's values; "messages or values" when the kind is unknown.
func rewrittenLine(kind queue.Kind, n int) string {
	one, many := "message or value", "messages or values"
	switch kind {
	case queue.KindAck:
		one, many = "message", "messages"
	case queue.KindSorted, queue.KindWindowed:
		one, many = "value", "values"
	}
	if n == 1 {
		return "rewritten: 1 " + one + " copied past the damage (or dropped where its record was lost); damaged segments removed"
	}
	return fmt.Sprintf("rewritten: %d %s copied past the damage (or dropped where their record was lost); damaged segments removed", n, many)
}

// droppedLine names a dropped entry as a queue of kind calls it: an ack
// queue's message by its id, a sorted or windowed queue's value by its key
// (Lost.ID holds either); "id or key" when the kind is unknown.
func droppedLine(kind queue.Kind, m queue.Lost) string {
	switch kind {
	case queue.KindAck:
		return fmt.Sprintf("dropped message: seq %d id %q", m.Seq, m.ID)
	case queue.KindSorted, queue.KindWindowed:
		return fmt.Sprintf("dropped value: seq %d key %q", m.Seq, m.ID)
	}
	return fmt.Sprintf("dropped: seq %d id or key %q", m.Seq, m.ID)
}

// lsnRange prints an LSN range as RepairReport.LostLSNs gives it: FIRST,
// FIRST-LAST, or in words when its last LSN or both bounds are unknown.
func lsnRange(r [2]uint64) string {
	switch {
	case r[0] == 0:
		return "unknown"
	case r[1] == 0:
		return fmt.Sprintf("from %d (the last one is unknown)", r[0])
	case r[0] == r[1]:
		return fmt.Sprint(r[0])
	}
	return fmt.Sprintf("%d-%d", r[0], r[1])
}

// repairJSON is repair --json's object.
type repairJSON struct {
	Dir      string      `json:"dir"`
	Before   checkJSON   `json:"before"`
	Backup   string      `json:"backup"` // "" when none was made
	Repaired bool        `json:"repaired"`
	LostLSNs [][2]uint64 `json:"lost_lsns"` // first and last; 0 when unknown
	Dropped  []lostJSON  `json:"dropped"`
	After    *checkJSON  `json:"after"`  // null when no salvage ran
	Result   string      `json:"result"` // clean, repaired or corrupt
	Error    string      `json:"error,omitempty"`
}

type lostJSON struct {
	Seq      uint64 `json:"seq"`
	ID       string `json:"id"`
	IDBase64 string `json:"id_base64,omitempty"`
}

func toRepairJSON(dir, backup string, rep queue.RepairReport, err error) repairJSON {
	j := repairJSON{Dir: dir, Before: toCheckJSON(dir, rep.Before), Backup: backup, Repaired: rep.Repaired,
		LostLSNs: [][2]uint64{}, Dropped: []lostJSON{}, Result: "repaired"}
	if rep.Repaired {
		j.LostLSNs = append(j.LostLSNs, rep.LostLSNs()...)
		after := toCheckJSON(dir, rep.After)
		j.After = &after
	}
	for _, m := range rep.Recovery.Dropped {
		l := lostJSON{Seq: m.Seq}
		l.ID, l.IDBase64 = twin.Split(m.ID)
		j.Dropped = append(j.Dropped, l)
	}
	switch {
	case err != nil:
		j.Result, j.Error = "corrupt", err.Error()
	case rep.Before.Clean():
		j.Result = "clean"
	}
	return j
}
