package leakcheck_test

import (
	"strings"
	"testing"
	"time"

	"github.com/walq/walq/internal/leakcheck"
)

const self = "github.com/walq/walq/internal/leakcheck"

// blocked parks until stop is closed: a goroutine of this package that a
// test left running.
func blocked(stop chan struct{}) { <-stop }

// A goroutine of the package (here its external test package) is found
// and named while it runs, and Wait returns "" once it ended; goroutines
// of other packages are not looked at.
func TestRunningNamesOwnGoroutines(t *testing.T) {
	stop := make(chan struct{})
	go blocked(stop)
	left := leakcheck.Wait(50*time.Millisecond, self)
	if !strings.Contains(left, "--- "+self+"_test.blocked(") {
		close(stop)
		t.Fatalf("the parked goroutine is not named:\n%s", left)
	}
	if other := leakcheck.Running("github.com/walq/walq/wal"); len(other) != 0 {
		close(stop)
		t.Fatalf("goroutines of another package reported: %v", other)
	}
	close(stop)
	if left := leakcheck.Wait(5*time.Second, self); left != "" {
		t.Fatalf("the goroutine ended, yet:\n%s", left)
	}
}

// The caller's own goroutine, whose stack holds the package's frames, is
// not a leak.
func TestCallerNotCounted(t *testing.T) {
	if left := leakcheck.Running(self); len(left) != 0 {
		t.Fatalf("the caller's goroutine was counted: %v", left)
	}
}
