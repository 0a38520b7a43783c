package main

import (
	"fmt"
	"testing"
)

// TestRedisBacklog runs the backlog workload on the Redis rows: every
// message comes back, and the memory figures include the redis-server's,
// which holds the whole backlog.
func TestRedisBacklog(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes and redis-servers")
	}
	if !haveRedis() { // never under CI: there the rows stay and fail
		t.Skip("redis-server is not on PATH")
	}
	const size = 8 << 20
	for _, name := range []string{"redisq/everysec", "streams/everysec"} {
		t.Run(name, func(t *testing.T) {
			systems, err := selectSystems(allSystems(), name)
			if err != nil {
				t.Fatal(err)
			}
			if !applies(systems[0], wBacklog) {
				t.Fatalf("%s does not take part in the backlog workload", name)
			}
			out := runBacklog(t, systems[0], size)
			grow, drain := out[0], out[2]
			if grow.Ops != size/1024 || drain.Ops != size/1024 {
				t.Errorf("grew %d and drained %d messages, want %d each", grow.Ops, drain.Ops, size/1024)
			}
			for _, s := range []sample{grow, drain} {
				var peak, anon int64
				if _, err := fmt.Sscanf(s.Note, "server process: peak RSS %d, anonymous RSS %d bytes", &peak, &anon); err != nil {
					t.Fatalf("%s: note %q: %v", s.Phase, s.Note, err)
				}
				if peak < size {
					t.Errorf("%s: the server's peak RSS %d is below the backlog's %d bytes", s.Phase, peak, size)
				}
				if s.RSS <= peak {
					t.Errorf("%s: RSS %d does not add the client's to the server's %d", s.Phase, s.RSS, peak)
				}
			}
			if grow.AnonRSS < size {
				t.Errorf("grow: peak anonymous RSS %d, below the backlog's %d bytes held by the server", grow.AnonRSS, size)
			}
			if grow.Disk <= 0 {
				t.Errorf("grow: %d bytes on disk: the server's AOF is not in the system's directory", grow.Disk)
			}
		})
	}
}
