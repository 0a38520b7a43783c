package cli

import (
	"flag"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/walq/walq/queue"
)

var versionCmd = &command{
	name:  "version",
	args:  "",
	short: "walq's version and the on-disk formats it reads and writes",
	long: `Version prints the module version walq was built from (or "devel" for a
build from a source tree), the Go release that built it, and the version of
the on-disk formats it reads and writes: the queue directory's format
(its IDENTITY file), the log entry format and the snapshot format.`,
	example: `walq version`,
	exits:   []int{exitOK},
	nargs:   [2]int{0, 0},
	setup: func(fs *flag.FlagSet) func(*env, []string) error {
		return func(e *env, _ []string) error {
			printVersion(e.stdout)
			return nil
		}
	},
}

// Format versions walq writes, as the packages document them: the log
// entry's version byte (wal) and the snapshot header's (recovery).
const (
	logEntryVersion = 2
	snapshotVersion = 1
)

// printVersion prints the build and format versions.
func printVersion(w io.Writer) {
	version := "devel"
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		version = bi.Main.Version
	}
	fmt.Fprintf(w, "walq %s (%s)\n", version, runtime.Version())
	fmt.Fprintf(w, "formats: directory %d, log entry %d, snapshot %d\n",
		queue.FormatVersion, logEntryVersion, snapshotVersion)
}
