package cli

import (
	"errors"
	"fmt"
	"io"

	"github.com/walq/walq/queue"
	"github.com/walq/walq/wal"
)

// The exit statuses, documented in every command's help.
const (
	exitOK        = 0 // success
	exitFailure   = 1 // usage error or failure
	exitCorrupt   = 2 // the queue is corrupt
	exitLocked    = 3 // another process has the directory open
	exitEmpty     = 4 // dequeue: no message ready
	exitNotFound  = 5 // no such delivery (lease lost) or dead letter
	exitDuplicate = 6 // enqueue: id already in use
	exitTorn      = 7 // verify: a torn tail only, which the next open cuts
)

// exitText says what each status means, for the help.
var exitText = map[int]string{
	exitOK:        "success",
	exitFailure:   "usage error or failure",
	exitCorrupt:   "the queue is corrupt (walq verify says where)",
	exitLocked:    "another process has the directory open",
	exitEmpty:     "no message is ready",
	exitNotFound:  "no such delivery (its lease was lost) or dead letter",
	exitDuplicate: "the id is already in use",
	exitTorn:      "verify: a torn tail only (repairable: the next open cuts it)",
}

// allExits lists every status, for the overview.
var allExits = []int{exitOK, exitFailure, exitCorrupt, exitLocked, exitEmpty, exitNotFound, exitDuplicate, exitTorn}

// printExits prints the exit statuses in codes; notes replaces the
// meaning of some of them for one command.
func printExits(w io.Writer, codes []int, notes map[int]string) {
	fmt.Fprint(w, "Exit status:\n")
	for _, c := range codes {
		text := exitText[c]
		if n, ok := notes[c]; ok {
			text = n
		}
		fmt.Fprintf(w, "  %d  %s\n", c, text)
	}
}

// overviewNotes are the command-specific meanings the overview mentions.
var overviewNotes = map[int]string{
	exitFailure: "usage error or failure; demo: a message was lost",
	exitEmpty:   "dequeue: no message is ready",
}

// exitError is an error that carries its exit status.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// withExit gives err the exit status code.
func withExit(code int, err error) error { return &exitError{code: code, err: err} }

// usageError is a mistake in the command line.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

// usagef returns a usageError.
func usagef(format string, args ...any) error { return &usageError{msg: fmt.Sprintf(format, args...)} }

// exitCode maps an error to the exit status the help documents.
func exitCode(err error) int {
	var ee *exitError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ee):
		return ee.code
	case errors.Is(err, queue.ErrCorrupt):
		return exitCorrupt
	case errors.Is(err, queue.ErrLocked):
		return exitLocked
	case errors.Is(err, queue.ErrEmpty):
		return exitEmpty
	case errors.Is(err, queue.ErrNotFound), errors.Is(err, queue.ErrLeaseLost):
		return exitNotFound
	case errors.Is(err, queue.ErrDuplicate):
		return exitDuplicate
	}
	return exitFailure
}

// hint returns a line of advice for err from the command cmd on the
// queue dir (a directory, or a queue on a server when onServer), or "".
func hint(err error, cmd, dir string, onServer bool) string {
	switch {
	case errors.Is(err, queue.ErrCorrupt) && onServer:
		return fmt.Sprintf("%s is a queue on a server, which 'walq verify' and 'walq repair' do not read (they check "+
			"and mend a queue directory): the error says what is damaged, to be mended on the server.", dir)
	case errors.Is(err, queue.ErrLocked) && readsInUse(cmd):
		return fmt.Sprintf("the process that has %s open compacted its log under every read; nothing is wrong with "+
			"the queue: run '%s' again, or when the queue is less busy.", dir, "walq "+cmd)
	case errors.Is(err, queue.ErrLocked):
		return fmt.Sprintf("another process has %s open; walq does not change or verify a queue while its owner runs. "+
			"To read it, 'walq stats', 'dump', 'dlq list' and 'dlq show' read its files anyway, and with --url URL read "+
			"that process's dashboard, if it mounts one (whose actions, if enabled, requeue and purge dead letters). "+
			"To change or verify it with walq, stop that process first.", dir)
	case errors.Is(err, wal.ErrForeign) && cmd != "verify": // verify's result line says it
		return fmt.Sprintf("no walq command changes a file walq never writes, a repair neither: move the file named out of %s's log directory; 'walq verify %s' then checks the rest.", dir, dir)
	case errors.Is(err, queue.ErrLaterFront) && cmd != "verify": // verify's result line says it
		return fmt.Sprintf("no walq command finishes that truncation, a repair neither (it would lose the records the queue needs): "+
			"move the marker named out of %s's log directory, which keeps every segment; 'walq verify %s' then checks the rest.", dir, dir)
	case errors.Is(err, wal.ErrSegmentSizeUnknown) && cmd != "verify": // verify's result line says it
		return fmt.Sprintf("only the queue's segment size tells a roll a crash tore from missing segments: "+
			"'walq verify --segment-size BYTES %s', with the application's Options.SegmentSize (4MiB when it sets none), "+
			"says which, and 'walq repair --segment-size BYTES %s' cuts a torn roll after a backup.", dir, dir)
	case errors.Is(err, queue.ErrCorrupt) && cmd != "verify" && cmd != "repair":
		return fmt.Sprintf("run 'walq verify %s' to see every problem, and 'walq repair %s' to skip the damage after a backup.", dir, dir)
	case errors.Is(err, queue.ErrLeaseLost):
		return "the lease ran out or the message was already acked; it is ready again (or delivered to another consumer)."
	}
	return ""
}

// readsInUse reports whether the command cmd reads a queue another
// process has open (a read-only open), which fails with ErrLocked only
// when that process's compactions overtook every read.
func readsInUse(cmd string) bool {
	switch cmd {
	case "stats", "dump", "dlq list", "dlq show":
		return true
	}
	return false
}
