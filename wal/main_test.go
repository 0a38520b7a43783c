package wal_test

import (
	"testing"

	"github.com/walq/walq/internal/leakcheck"
)

// TestMain fails the run when a test leaves a log's goroutines (committer,
// syncer, hinter) or a goroutine of its own that calls the log running
// after the tests ended: every test closes the logs it opens.
func TestMain(m *testing.M) {
	leakcheck.Main(m, "github.com/walq/walq/wal")
}
