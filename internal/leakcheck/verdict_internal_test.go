package leakcheck

import (
	"strings"
	"testing"
	"time"
)

const self = "github.com/walq/walq/internal/leakcheck"

// parked waits until stop is closed: a goroutine that a test left running.
func parked(stop chan struct{}) { <-stop }

// The binary fails when a goroutine of the package outlives the tests,
// naming it; it keeps the tests' own status when they failed, without
// looking; and it passes once the goroutine has ended.
func TestVerdict(t *testing.T) {
	stop := make(chan struct{})
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
	}()
	go parked(stop)
	var w strings.Builder
	if code := verdict(0, 50*time.Millisecond, &w, []string{self}); code != 1 {
		t.Fatalf("a goroutine left running: exit status %d, want 1", code)
	}
	for _, want := range []string{"leakcheck: goroutines of " + self + " still running 50ms", "--- " + self + ".parked("} {
		if !strings.Contains(w.String(), want) {
			t.Fatalf("the report lacks %q:\n%s", want, w.String())
		}
	}
	w.Reset()
	if code := verdict(3, 50*time.Millisecond, &w, []string{self}); code != 3 || w.Len() != 0 {
		t.Fatalf("failed tests: exit status %d (want 3), report %q (want none)", code, w.String())
	}
	close(stop)
	if code := verdict(0, 5*time.Second, &w, []string{self}); code != 0 {
		t.Fatalf("the goroutine ended: exit status %d, want 0:\n%s", code, w.String())
	}
}
