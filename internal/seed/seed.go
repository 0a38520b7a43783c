// Package seed gives randomized tests their seed: WALQ_SEED when it is
// set, so that a failure can be replayed, else the clock. It logs the seed
// with the command that replays it, so that a failing run shows it.
package seed

import (
	"os"
	"strconv"
	"testing"
	"time"
)

// Env is the environment variable that sets the seed.
const Env = "WALQ_SEED"

// Take returns the seed of t: WALQ_SEED's, or the clock's. It logs it with
// the command that replays t, whose package is pkg ("./queue"), and fails
// t on a WALQ_SEED that is not an unsigned integer.
func Take(t testing.TB, pkg string) uint64 {
	t.Helper()
	s := uint64(time.Now().UnixNano())
	if v := os.Getenv(Env); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", Env, v, err)
		}
		s = n
	}
	t.Logf("seed %d (replay: %s=%d go test %s -run '^%s$')", s, Env, s, pkg, t.Name())
	return s
}
