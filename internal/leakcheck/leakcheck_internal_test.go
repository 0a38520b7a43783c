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

// A frame is the package's when its function is in the package or in its
// external test package, not in one whose path merely starts alike (a
// subpackage, a sibling, a dependency of the same name).
func TestInPackage(t *testing.T) {
	const wal = "github.com/walq/walq/wal"
	for _, c := range []struct {
		fn   string
		want bool
	}{
		{"github.com/walq/walq/wal.(*committer).run(0xc0002ea588)", true},
		{"github.com/walq/walq/wal_test.TestAppendLazy.func1()", true},
		{"github.com/walq/walq/wal.Open[...](...)", true},
		{"github.com/tidwall/wal.(*Log).Write(0xc000010000, 0x1)", false},
		{"github.com/walq/walq/walx.F()", false},
		{"github.com/walq/walq/wal/internal/seg.F()", false},
		{"github.com/walq/walq/wal_testing.F()", false},
		{"testing.tRunner(0xc000003500, 0x5b8a40)", false},
	} {
		if got := inPackage(c.fn, wal); got != c.want {
			t.Errorf("inPackage(%q, wal) = %v, want %v", c.fn, got, c.want)
		}
	}
}

// A goroutine is the tests' when its innermost frame of the packages is
// in the external test package or a Test function of the package (or a
// closure of one); one in the code under test is not, whoever started it.
func TestInTest(t *testing.T) {
	for _, c := range []struct {
		fn   string
		want bool
	}{
		{"github.com/walq/walq/wal_test.TestMain(...)", true},
		{"github.com/walq/walq/wal_test.helper(0x1)", true},
		{"github.com/walq/walq/wal.TestCloseWaitsForGoroutines(0xc000102000)", true},
		{"github.com/walq/walq/wal.TestCloseWaitsForGoroutines.func1()", true},
		{"github.com/walq/walq/wal.(*committer).syncer(...)", false},
		{"github.com/walq/walq/queue.(*Queue).Dequeue(0xc0001, {0x2, 0x3})", false},
		{"github.com/walq/walq/queue.testHook(0x1)", false},
	} {
		if got := InTest(Goroutine{Func: c.fn}); got != c.want {
			t.Errorf("InTest(%q) = %v, want %v", c.fn, got, c.want)
		}
	}
}
