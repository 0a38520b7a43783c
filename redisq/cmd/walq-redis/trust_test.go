package main_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/redisq/internal/redistest"
)

// TestTrustServer: a user that may write the queue but not read the
// server's configuration (CONFIG GET) was refused every change, told to
// set Options.TrustServer, which the command had no way to set. The
// refusal now names --trust-server, which skips the check, and the help of
// the commands that change a queue lists it.
func TestTrustServer(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	require.NoError(t, srv.Client().Do(ctx, "ACL", "SETUSER", "writer", "on", ">pw", "resetkeys", "~walq:{jobs}*",
		"&*", "+@all", "-config").Err())
	url := "redis://writer:pw@" + srv.Addr + "/0/jobs"

	r := run(t, 1, "", "enqueue", url, "x")
	require.Contains(t, r.stderr, "CONFIG GET")
	require.Contains(t, r.stderr, "--trust-server")
	run(t, 0, "", "enqueue", "--trust-server", url, "x")
	require.Contains(t, run(t, 0, "", "dequeue", "--trust-server", url).stdout, "\n\nx\n")
	require.Contains(t, run(t, 0, "", "stats", url).stdout, "in flight   1")

	for _, cmd := range [][]string{{"enqueue"}, {"dequeue"}, {"ack"}, {"nack"}, {"extend"}, {"requeue-expired"},
		{"dlq", "requeue"}, {"dlq", "purge"}} {
		help := run(t, 0, "", append([]string{"help"}, cmd...)...).stdout
		require.Contains(t, help, "--trust-server", "walq-redis help %v", cmd)
	}
	require.NotContains(t, run(t, 0, "", "help", "stats").stdout, "--trust-server", "stats only reads: it checks nothing")
}
