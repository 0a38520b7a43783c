package queue_test

import (
	"testing"

	"github.com/walq/walq/internal/leakcheck"
)

// TestMain fails the run when a test leaves a queue's goroutines
// (housekeeper, the log's committer and syncer) or a goroutine of its own
// that calls the queue running after the tests ended: every test closes
// what it opens. The conformance suite's goroutines (queuetest) count as
// the tests' own.
func TestMain(m *testing.M) {
	leakcheck.Main(m, ownPackages...)
}

// ownPackages are the packages whose goroutines a closed queue leaves none of.
var ownPackages = []string{"github.com/walq/walq/queue", "github.com/walq/walq/queue/queuetest", "github.com/walq/walq/wal"}
