package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
)

// command is one walq command.
type command struct {
	name    string // as typed: "stats", "dlq list"
	args    string // the usage line after the name: "[--json] DIR"
	short   string // one line for the command list
	long    string // what it does, for the help
	example string // shell lines for the help, one example per line
	exits   []int  // the exit statuses it can return
	// exitNotes gives some statuses a meaning of their own in the help.
	exitNotes map[int]string
	nargs     [2]int // the least and most positional arguments
	hidden    bool   // left out of the command list
	// serverWrites marks a command that changes a queue: with an engine
	// linked in, it takes --trust-server.
	serverWrites bool
	// dirOnly marks a command that reads a queue's files: with an engine
	// linked in, a DIR the engine owns (a queue on a server) is refused.
	dirOnly bool
	// setup declares the command's flags on fs and returns the function
	// that runs it with the positional arguments.
	setup func(fs *flag.FlagSet) func(e *env, args []string) error
}

// commands returns every command in the order of the overview.
func commands() []*command {
	return []*command{
		demoCmd, demoChildCmd, statsCmd, dumpCmd, verifyCmd, repairCmd,
		dlqListCmd, dlqShowCmd, dlqRequeueCmd, dlqPurgeCmd,
		enqueueCmd, dequeueCmd, ackCmd, nackCmd, extendCmd, requeueExpiredCmd, compactCmd, versionCmd,
	}
}

// lookup finds the command that args start with (one word, or two for
// "dlq list") and returns it with the rest of args.
func lookup(args []string) (*command, []string) {
	for _, n := range []int{2, 1} {
		if len(args) < n {
			continue
		}
		name := strings.Join(args[:n], " ")
		for _, c := range commands() {
			if c.name == name {
				return c, args[n:]
			}
		}
	}
	return nil, nil
}

// execute parses args and runs the command, printing its error.
func (c *command) execute(e *env, args []string) int {
	fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	runFn := c.flags(fs, e.engine, &e.trustServer)
	pos, err := parseArgs(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		c.printHelp(e.stdout, e.engine)
		return exitOK
	}
	if err == nil {
		err = c.checkArgs(pos)
	}
	if err == nil && c.dirOnly && len(pos) > 0 && e.owns(pos[0]) {
		err = usagef("%s is a queue on a server: walq %s reads a queue directory", Redacted(pos[0]), c.name)
	}
	if err != nil {
		fmt.Fprintf(e.stderr, "walq %s: %v\nUsage: %s\nRun 'walq help %s' for details.\n", c.name, err, c.usage(), c.name)
		return exitFailure
	}
	err = runFn(e, pos)
	if err != nil {
		c.report(e, err, pos)
	}
	return exitCode(err)
}

// report prints err, and a hint when there is one.
func (c *command) report(e *env, err error, pos []string) {
	var ue *usageError
	if errors.As(err, &ue) {
		fmt.Fprintf(e.stderr, "walq %s: %v\nUsage: %s\n", c.name, err, c.usage())
		return
	}
	fmt.Fprintf(e.stderr, "walq %s: %v\n", c.name, err)
	if len(pos) > 0 {
		if h := hint(err, c.name, Redacted(pos[0]), e.owns(pos[0])); h != "" {
			fmt.Fprintf(e.stderr, "hint: %s\n", h)
		}
	}
}

// checkArgs checks the number of positional arguments.
func (c *command) checkArgs(pos []string) error {
	lo, hi := c.nargs[0], c.nargs[1]
	switch {
	case len(pos) < lo && lo == 1:
		return usagef("missing DIR")
	case len(pos) < lo:
		return usagef("want at least %d arguments, got %d", lo, len(pos))
	case len(pos) > hi:
		return usagef("unexpected argument %q", Redacted(pos[hi]))
	}
	return nil
}

// parseArgs parses the flags in args, before or after the positional
// arguments, and returns the positional ones. After "--" everything is
// positional.
func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// flags declares the command's flags on fs, and, when engine opens queues
// on a server and the command changes one, --trust-server into trust; it
// returns the function that runs the command.
func (c *command) flags(fs *flag.FlagSet, engine Engine, trust *bool) func(e *env, args []string) error {
	run := c.setup(fs)
	if engine != nil && c.serverWrites {
		fs.BoolVar(trust, "trust-server", false, "with a queue on a server: skip the check of its configuration "+
			"(appendonly yes, maxmemory-policy noeviction), for a user that may not run CONFIG GET on a server "+
			"known to be so configured")
	}
	return run
}

// usage returns the command's usage line after "Usage: ": walq, its name
// and its arguments, if it takes any.
func (c *command) usage() string { return strings.TrimSpace("walq " + c.name + " " + c.args) }

// printHelp prints the command's usage, description, flags, example and
// exit statuses.
func (c *command) printHelp(w io.Writer, engine Engine) {
	fmt.Fprintf(w, "Usage: %s\n\n%s\n", c.usage(), strings.TrimSpace(c.long))
	fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
	c.flags(fs, engine, new(bool))
	printFlags(w, fs)
	if c.example != "" {
		fmt.Fprint(w, "\nExample:\n")
		for _, line := range strings.Split(strings.TrimSpace(c.example), "\n") {
			fmt.Fprintf(w, "  %s\n", strings.TrimSpace(line))
		}
	}
	fmt.Fprintln(w)
	printExits(w, c.exits, c.exitNotes)
}

// printFlags prints fs's flags in the --name form the commands use.
func printFlags(w io.Writer, fs *flag.FlagSet) {
	first := true
	fs.VisitAll(func(f *flag.Flag) {
		if first {
			fmt.Fprint(w, "\nFlags:\n")
			first = false
		}
		typ, usage := flag.UnquoteUsage(f)
		name := "--" + f.Name
		if typ != "" {
			name += " " + typ
		}
		def := ""
		if !slices.Contains([]string{"", "false", "0", "0s", "[]"}, f.DefValue) {
			def = fmt.Sprintf(" (default %s)", f.DefValue)
		}
		fmt.Fprintf(w, "  %-22s %s%s\n", name, usage, def)
	})
}
