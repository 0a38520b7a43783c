package cli

import (
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/term"

	"github.com/walq/walq/wal"
)

// Main runs the command named by os.Args and returns its exit status.
// engine opens the queues a command names by URL instead of a directory;
// nil when the binary knows directories only (cmd/walq).
func Main(engine Engine) int {
	e := &env{
		stdin:   os.Stdin,
		inTTY:   term.IsTerminal(int(os.Stdin.Fd())),
		stdout:  os.Stdout,
		stderr:  os.Stderr,
		outTTY:  term.IsTerminal(int(os.Stdout.Fd())),
		progTTY: term.IsTerminal(int(os.Stderr.Fd())),
		engine:  engine,
	}
	return run(e, os.Args[1:])
}

// env is what a command reads and writes besides its queue directory.
type env struct {
	stdin   io.Reader
	inTTY   bool      // stdin is a terminal
	stdout  io.Writer // results
	stderr  io.Writer // errors, notices and progress
	outTTY  bool      // stdout is a terminal
	progTTY bool      // stderr is a terminal: progress may be drawn on it
	engine  Engine    // opens queues named by URL; nil: directories only
	// trustServer is --trust-server: the engine skips its check of the
	// server's configuration (EngineOptions.TrustServer).
	trustServer bool
	// backupCopied, when set (by tests), is called with each file's path
	// relative to the queue directory once the backup has copied it.
	backupCopied func(rel string)
	// backupFS is the file system the backup writes, fsyncs and renames
	// its copy through; nil is the real one (tests: one that loses what
	// was not made durable, package crashfs).
	backupFS wal.FS
}

// run runs the command named by args and returns the exit status.
func run(e *env, args []string) int {
	if len(args) == 0 {
		printOverview(e.stderr, e.engine)
		return exitFailure
	}
	if args[0] == "help" || isHelpFlag(args[0]) {
		return help(e, args[1:])
	}
	c, rest := lookup(args)
	if c == nil {
		if len(args) == 2 && isHelpFlag(args[1]) && printGroup(e.stdout, args[0]) {
			return exitOK // "walq dlq --help"
		}
		if printGroup(e.stderr, args[0]) {
			return exitFailure
		}
		fmt.Fprintf(e.stderr, "walq: unknown command %q\nRun 'walq help' for the list of commands.\n", args[0])
		return exitFailure
	}
	return c.execute(e, rest)
}

// isHelpFlag reports whether arg asks for help.
func isHelpFlag(arg string) bool {
	return arg == "-h" || arg == "-help" || arg == "--help"
}

// printGroup prints the commands whose name starts with the word group
// ("dlq") and reports whether there were any.
func printGroup(w io.Writer, group string) bool {
	found := false
	for _, c := range commands() {
		if rest, ok := strings.CutPrefix(c.name, group+" "); ok && !c.hidden {
			if !found {
				fmt.Fprintf(w, "Usage: walq %s <command> [flags] DIR [arguments]\n\nCommands:\n", group)
				found = true
			}
			fmt.Fprintf(w, "  %-10s %s\n", rest, c.short)
		}
	}
	if found {
		fmt.Fprintf(w, "\nRun 'walq help %s <command>' for details.\n", group)
	}
	return found
}

// help prints the overview, or the help of the command named by args.
func help(e *env, args []string) int {
	if len(args) == 0 {
		printOverview(e.stdout, e.engine)
		return exitOK
	}
	c, rest := lookup(args)
	if c == nil && len(args) == 1 && printGroup(e.stdout, args[0]) {
		return exitOK
	}
	if c == nil || len(rest) > 0 {
		fmt.Fprintf(e.stderr, "walq help: unknown command %q\n", strings.Join(args, " "))
		return exitFailure
	}
	c.printHelp(e.stdout, e.engine)
	return exitOK
}

// printOverview prints the list of commands, and the targets engine
// opens where they take DIR (engine may be nil).
func printOverview(w io.Writer, engine Engine) {
	fmt.Fprint(w, "walq looks inside a walq queue directory, repairs it and scripts it.\n\n")
	fmt.Fprint(w, "Usage:\n  walq <command> [flags] DIR [arguments]\n  walq help <command>\n\n")
	if engine != nil {
		fmt.Fprintf(w, "stats, dlq, enqueue, dequeue, ack, nack, extend and requeue-expired also\ntake, for DIR, a queue on a server: %s\n"+
			"There stats, dlq list and dlq show change nothing: they end no expired\nlease and make no delayed message ready. The others change what they\nare asked alone: they end no expired lease either, but requeue-expired.\n\n", engine.Form())
	}
	fmt.Fprint(w, "Commands:\n")
	for _, c := range commands() {
		if !c.hidden {
			fmt.Fprintf(w, "  %-15s %s\n", c.name, c.short)
		}
	}
	fmt.Fprint(w, "\nStart with: walq demo\n\n")
	printExits(w, allExits, overviewNotes)
}
