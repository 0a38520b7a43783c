package redisq_test

import (
	"os"
	"testing"
)

// TestMain runs the test binary as a competing consumer when a test
// re-executes it with WALQ_REDISQ_CHILD set (TestManyProcesses).
func TestMain(m *testing.M) {
	if os.Getenv("WALQ_REDISQ_CHILD") != "" {
		os.Exit(childConsumer())
	}
	os.Exit(m.Run())
}
