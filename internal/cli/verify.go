package cli

import (
	"encoding/json"
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
	args:  "[--json] [--segment-size BYTES] DIR",
	short: "check every checksum and the replay, changing nothing",
	long: `Verify checks the queue in DIR without changing anything. It runs the
checks the queue's open runs, on every byte: the newest snapshot's
checksum; the framing, checksum and order of every log entry; segment files
that follow on from each other (none missing); a log that reaches at least
the snapshot's LSN and reaches back to every record the snapshot's messages
need; and that every record after the snapshot replays. It prints every
problem with its file and byte offset.

A torn tail (the end of the last segment cut short by a crash) is
repairable: the next open of the queue cuts it by itself, and so does
'walq repair'. Anything else is damage: the queue refuses to open until
'walq repair' (or Options.Salvage) drops what was lost, except a file in
the log directory that walq never writes and no repair changes (a
tidwall/wal END file, a START file without a valid entry): verify names
it, to be moved out. So it names walq's own NAME.FRONT truncation marker
when the truncation it marks would remove records the snapshot needs (a
marker from a later moment than the snapshot: a directory put back from
copies made at different times; beside a damaged newest snapshot, than
the older snapshot a repair falls back to, or the log alone): moved out
of the log directory, every segment is kept; a repair and
Options.Salvage refuse it, since finishing the truncation would lose
those records.

A crash during a segment roll can lose the sealed segment's last entries
whole under the roll's new, empty segment: a torn roll, which the next
open cuts, and which only the size the queue seals its segments at tells
from segments gone missing after a whole one. Without --segment-size
verify cannot tell which and says so; --segment-size BYTES, the
application's Options.SegmentSize (4MiB when it sets none), tells: a
torn roll is then a torn tail. A size larger than the application's lets
missing segments pass for a torn roll.

With --json it prints one JSON object: dir, snapshot, records, torn,
damaged, problems, foreign, front (the marker's problem, "" when none) and
result ("clean", "torn" or "corrupt").

Verify reads under a shared lock, so it refuses a directory that a queue
has open.`,
	example: `walq verify /var/lib/app/jobs && echo clean
walq verify --json /var/lib/app/jobs | jq .result
walq verify --segment-size 64MiB /var/lib/app/jobs`,
	exits: []int{exitOK, exitFailure, exitCorrupt, exitLocked, exitTorn},
	exitNotes: map[int]string{
		exitOK:      "clean",
		exitFailure: "usage error, or the check could not run (the error says why)",
		exitCorrupt: "damage other than a torn tail (walq repair drops what was lost)",
		exitTorn:    "a torn tail only: repairable, the next open cuts it",
	},
	nargs:   [2]int{1, 1},
	dirOnly: true,
	setup: func(fs *flag.FlagSet) func(*env, []string) error {
		asJSON := fs.Bool("json", false, "print one JSON object")
		segSize := segmentSizeFlag(fs)
		return func(e *env, args []string) error { return runVerify(e, args[0], segSize.n, *asJSON) }
	},
}

// segmentSizeFlag declares --segment-size on fs.
func segmentSizeFlag(fs *flag.FlagSet) *sizeFlag {
	f := &sizeFlag{min: 4096}
	fs.Var(f, "segment-size", "the queue's Options.SegmentSize, `BYTES` (e.g. 4MiB, the default): "+
		"tells a roll a crash tore from missing segments")
	return f
}

func runVerify(e *env, dir string, segSize int64, asJSON bool) error {
	if err := checkQueueDir(dir); err != nil {
		return err
	}
	sp := e.spinner("verifying " + dir)
	c, err := queue.Verify(dir, &queue.VerifyOptions{SegmentSize: segSize})
	sp.done()
	if err != nil && !errors.Is(err, queue.ErrCorrupt) {
		return err
	}
	if asJSON {
		if jerr := json.NewEncoder(e.stdout).Encode(toCheckJSON(dir, c)); jerr != nil {
			return jerr
		}
	} else {
		printCheck(e.stdout, dir, c)
		printResult(e.stdout, dir, c)
	}
	return verifyExit(dir, c, err)
}

// verifyExit returns the error that gives verify its exit status.
func verifyExit(dir string, c queue.Check, err error) error {
	switch {
	case err != nil:
		return withExit(exitCorrupt, err)
	case c.Log.Torn != nil:
		return withExit(exitTorn, fmt.Errorf("%s has a torn tail, which the next open cuts", dir))
	}
	return nil
}

// printCheck prints what the checks looked at and every problem found.
func printCheck(w io.Writer, dir string, c queue.Check) {
	fmt.Fprintf(w, "verify %s\n", dir)
	if s := c.Snapshot; s != nil {
		fmt.Fprintf(w, "  snapshot  %s: LSN %d, %s, checksum ok\n", filepath.Base(s.Path), s.LSN, sizeText(s.Bytes))
		fmt.Fprintf(w, "  log       %s replayed after the snapshot\n", plural(c.Records, "record"))
	} else {
		fmt.Fprintf(w, "  snapshot  none usable\n  log       %s replayed\n", plural(c.Records, "record"))
	}
	if c.Log.Torn != nil {
		fmt.Fprintf(w, "  torn tail %s\n", describeDamage(*c.Log.Torn))
	}
	for _, d := range c.Log.Salvaged {
		fmt.Fprintf(w, "  damaged   %s\n", describeDamage(d))
	}
	for _, p := range c.Problems {
		fmt.Fprintf(w, "  corrupt   %s\n", p)
	}
	for _, f := range c.Foreign {
		fmt.Fprintf(w, "  foreign   %s\n", f)
	}
	if c.Front != "" {
		fmt.Fprintf(w, "  marker    %s\n", c.Front)
	}
}

// printResult prints verify's last line.
func printResult(w io.Writer, dir string, c queue.Check) {
	switch {
	case len(c.Foreign) > 0:
		fmt.Fprint(w, "result: corrupt; no repair changes a file walq never writes: move the foreign file out of the log directory, then verify again\n")
	case c.Front != "":
		fmt.Fprint(w, "result: corrupt; a truncation marker from a later moment than the snapshot: move the marker named out of the log directory "+
			"(every segment is then kept), then verify again; a repair refuses it, since finishing the truncation would lose the records the snapshot needs\n")
	case c.SizeUnknown():
		fmt.Fprintf(w, "result: a torn roll or missing segments; only the queue's segment size tells which: "+
			"run 'walq verify --segment-size BYTES %s' with the application's Options.SegmentSize (4MiB when it sets none); "+
			"a torn roll is then repairable: the application's Open cuts it, and so does 'walq repair --segment-size BYTES %s'\n", dir, dir)
	case c.Damaged() > 0:
		fmt.Fprintf(w, "result: corrupt; 'walq repair %s' backs it up and drops what was lost\n", dir)
	case c.Log.Torn != nil:
		fmt.Fprintf(w, "result: torn tail, repairable: the next open cuts it, or run 'walq repair %s'\n", dir)
	default:
		fmt.Fprint(w, "result: clean\n")
	}
}

// checkJSON is verify --json's object.
type checkJSON struct {
	Dir      string       `json:"dir"`
	Snapshot *fileJSON    `json:"snapshot"` // null when none is usable
	Records  int          `json:"records"`
	Torn     *damageJSON  `json:"torn"` // null when the tail is whole
	Damaged  []damageJSON `json:"damaged"`
	Problems []string     `json:"problems"`
	Foreign  []string     `json:"foreign"` // files walq never writes, to be moved out
	Front    string       `json:"front"`   // a truncation marker from a later moment than the snapshot, to be moved out; "" when none
	Result   string       `json:"result"`  // clean, torn or corrupt
}

// damageJSON is one damaged region of a segment.
type damageJSON struct {
	Segment  string `json:"segment"`
	Offset   int64  `json:"offset"`
	Bytes    int64  `json:"bytes"`
	Entries  int    `json:"entries"`
	FirstLSN uint64 `json:"first_lsn"` // 0 when unknown
	LastLSN  uint64 `json:"last_lsn"`  // 0 when unknown
	Reason   string `json:"reason"`
}

func toCheckJSON(dir string, c queue.Check) checkJSON {
	j := checkJSON{Dir: dir, Records: c.Records, Damaged: []damageJSON{}, Problems: append([]string{}, c.Problems...),
		Foreign: append([]string{}, c.Foreign...), Front: c.Front, Result: "clean"}
	if s := c.Snapshot; s != nil {
		j.Snapshot = &fileJSON{Path: s.Path, LSN: s.LSN, Bytes: s.Bytes}
	}
	if t := c.Log.Torn; t != nil {
		d := toDamageJSON(*t)
		j.Torn, j.Result = &d, "torn"
	}
	for _, d := range c.Log.Salvaged {
		j.Damaged = append(j.Damaged, toDamageJSON(d))
	}
	if c.Damaged() > 0 {
		j.Result = "corrupt"
	}
	return j
}

func toDamageJSON(d wal.Damage) damageJSON {
	return damageJSON{Segment: d.Segment, Offset: d.Offset, Bytes: d.Bytes, Entries: d.Entries,
		FirstLSN: d.FirstLSN, LastLSN: d.LastLSN, Reason: d.Reason}
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
	case d.FirstLSN != 0 && d.LastLSN != 0 && d.LastLSN+1 == d.FirstLSN:
		s += ", no LSN" // a torn witness, which holds no record
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
