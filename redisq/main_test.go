package redisq_test

import (
	"os"
	"testing"
)

// TestMain runs the test binary as a competing consumer when a test
// re-executes it with WALQ_REDISQ_CHILD set (TestManyProcesses; "sorted" or
// "windowed": TestSortedManyProcesses).
func TestMain(m *testing.M) {
	switch child := os.Getenv("WALQ_REDISQ_CHILD"); child {
	case "":
		os.Exit(m.Run())
	case "sorted", "windowed":
		os.Exit(childSortedConsumer(child))
	default:
		os.Exit(childConsumer())
	}
}
