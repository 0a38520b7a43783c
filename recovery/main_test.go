package recovery_test

import (
	"testing"

	"github.com/walq/walq/internal/leakcheck"
)

// TestMain fails the run when a test leaves a log it recovered open (its
// committer and syncer running) or a goroutine of its own that calls
// recovery running after the tests ended.
func TestMain(m *testing.M) {
	leakcheck.Main(m, "github.com/walq/walq/recovery", "github.com/walq/walq/wal")
}
