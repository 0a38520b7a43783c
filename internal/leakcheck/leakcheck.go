package leakcheck

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// Grace is how long Main waits, after the tests, for goroutines that are
// ending to end: a goroutine a test started itself (a consumer that saw
// ErrClosed), which returns just after the Close that ended its call. A loaded machine
// may schedule them late. A passing run waits only as long as one runs.
const Grace = 10 * time.Second

// Main runs the tests of m and exits with their status. When they passed, it
// then waits up to Grace for every goroutine with a frame of the packages
// named by pkgs (import paths; a package's external test package counts as
// the package) to end, and fails the run naming those still alive, with
// their stacks. When the tests failed it does not look: a failed test may
// stop before its Close, and the failure is what the reader needs.
func Main(m *testing.M, pkgs ...string) {
	os.Exit(verdict(m.Run(), Grace, os.Stderr, pkgs))
}

// verdict returns the exit status of a test binary whose tests returned
// code: code if they failed, else 1 if goroutines of pkgs are still
// running after grace (it names them on w), else 0.
func verdict(code int, grace time.Duration, w io.Writer, pkgs []string) int {
	if code != 0 {
		return code
	}
	left := Wait(grace, pkgs...)
	if left == "" {
		return 0
	}
	fmt.Fprintf(w, "leakcheck: goroutines of %s still running %v after the tests ended (a test did not close what it opened):\n%s",
		strings.Join(pkgs, ", "), grace, left)
	return 1
}

// Wait waits up to grace for the goroutines with a frame of pkgs (other
// than the caller's) to end. It returns "" when they did, else the stacks
// of those still running, each headed by a line naming its top frame of
// pkgs.
func Wait(grace time.Duration, pkgs ...string) string {
	return wait(grace, pkgs, func(Goroutine) bool { return false })
}

// WaitInTest is Wait for a test, called while the tests run: it ignores
// the goroutines whose innermost frame of pkgs is a test's (see InTest),
// such as the test binary's main goroutine, in TestMain, and a test
// waiting for its subtests.
func WaitInTest(grace time.Duration, pkgs ...string) string {
	return wait(grace, pkgs, InTest)
}

// InTest reports whether g's innermost frame of the packages looked for is
// a test function of the external test package or a Test function (or a
// closure of one) of the package itself: a goroutine of the tests rather
// than of the code under test. A goroutine a test started that is in the
// code under test (a consumer blocked in a call) is not.
func InTest(g Goroutine) bool {
	fn, _, _ := strings.Cut(g.Func, "(")
	i := strings.LastIndex(fn, "/")
	pkg, name, _ := strings.Cut(fn[i+1:], ".")
	return strings.HasSuffix(pkg, "_test") || strings.HasPrefix(name, "Test")
}

func wait(grace time.Duration, pkgs []string, ignore func(Goroutine) bool) string {
	deadline := time.Now().Add(grace)
	for {
		left := slices.DeleteFunc(Running(pkgs...), ignore)
		if len(left) == 0 {
			return ""
		}
		if time.Now().After(deadline) {
			var b strings.Builder
			for _, g := range left {
				fmt.Fprintf(&b, "--- %s\n%s\n\n", g.Func, g.Stack)
			}
			return b.String()
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Goroutine is one running goroutine of the packages looked for.
type Goroutine struct {
	Func  string // its innermost function (or creator) in those packages
	Stack string // its stack, as runtime.Stack prints it
}

// Running returns the goroutines, other than the caller's, that have a
// frame of a function of pkgs, or were created by one.
func Running(pkgs ...string) []Goroutine {
	var left []Goroutine
	for i, stack := range stacks() {
		if i == 0 {
			continue // runtime.Stack prints the caller's goroutine first
		}
		if fn := ownFrame(stack, pkgs); fn != "" {
			left = append(left, Goroutine{Func: fn, Stack: stack})
		}
	}
	return left
}

// stacks returns the stacks of all goroutines, the caller's first.
func stacks() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []string
	for _, s := range bytes.Split(buf, []byte("\n\n")) {
		if len(bytes.TrimSpace(s)) > 0 {
			out = append(out, string(s))
		}
	}
	return out
}

// ownFrame returns the first function of pkgs in stack (a frame's
// function line, or the "created by" line), or "".
func ownFrame(stack string, pkgs []string) string {
	for _, line := range strings.Split(stack, "\n") {
		if strings.HasPrefix(line, "\t") || strings.HasPrefix(line, "goroutine ") {
			continue // a file:line, or the header
		}
		fn := strings.TrimPrefix(line, "created by ")
		if i := strings.Index(fn, " in goroutine "); i >= 0 {
			fn = fn[:i]
		}
		for _, p := range pkgs {
			if inPackage(fn, p) {
				return fn
			}
		}
	}
	return ""
}

// inPackage reports whether fn, as a stack prints a function
// ("path/pkg.(*T).m(...)", "path/pkg_test.TestX.func1()"), is in package
// pkg or its external test package.
func inPackage(fn, pkg string) bool {
	rest, ok := strings.CutPrefix(fn, pkg)
	if !ok {
		return false
	}
	rest = strings.TrimPrefix(rest, "_test")
	return strings.HasPrefix(rest, ".")
}
