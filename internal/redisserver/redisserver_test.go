//go:build !windows

package redisserver_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/internal/redisserver"
)

// realServer returns the path of redis-server, skipping the test where
// there is none (failing under CI).
func realServer(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("redis-server is not on PATH; CI must install it")
		}
		t.Skip("redis-server is not on PATH")
	}
	return bin
}

// slowServer puts first on PATH a redis-server that sleeps for the
// given shell duration before it runs the real one, as a loaded machine
// may hold a niced server's start.
func slowServer(t *testing.T, sleep string) {
	t.Helper()
	bin := realServer(t)
	dir := t.TempDir()
	script := "#!/bin/sh\nsleep " + sleep + "\nexec '" + bin + "' \"$@\"\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "redis-server"), []byte(script), 0o755))
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
}

// TestStartWaitsForASlowServer: a server that takes longer than ten
// seconds to come up is waited for, not killed and reported as failed.
func TestStartWaitsForASlowServer(t *testing.T) {
	slowServer(t, "12")
	s, err := redisserver.Start(t.TempDir())
	require.NoError(t, err)
	defer s.Kill()
	require.NotZero(t, s.Pid(), "Start returned a server that is not running")
	require.NoError(t, s.Stop())
}

// TestStartReportsAnExit: a server that exits before it answers (here on
// an unknown option) makes Start fail saying so, and leaves nothing to
// kill.
func TestStartReportsAnExit(t *testing.T) {
	realServer(t)
	s, err := redisserver.Start(t.TempDir(), "--no-such-option", "x")
	if err == nil {
		s.Kill()
	}
	require.ErrorContains(t, err, "exited before it answered")
}

// TestStartTakesAnotherPort: a server that exits because another process
// bound its port first (freePort's port is free only until it returns)
// is started again on another port.
func TestStartTakesAnotherPort(t *testing.T) {
	bin := realServer(t)
	dir := t.TempDir()
	marker := filepath.Join(dir, "tried")
	script := "#!/bin/sh\nif [ ! -e '" + marker + "' ]; then\n" +
		"  touch '" + marker + "'\n" +
		"  echo 'Could not create server TCP listening socket: bind: Address already in use' > redis.log\n" +
		"  exit 1\nfi\nexec '" + bin + "' \"$@\"\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "redis-server"), []byte(script), 0o755))
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	s, err := redisserver.Start(t.TempDir())
	require.NoError(t, err)
	defer s.Kill()
	require.FileExists(t, marker, "the first start was refused its port")
	require.NoError(t, s.Stop())
}

// TestStartIsNotFooledByAnotherServer: a server whose port another server
// holds cannot bind it and exits; the other server's answer to PING must
// not be taken for its own. Restart on a port taken meanwhile fails
// instead of handing the caller someone else's server.
func TestStartIsNotFooledByAnotherServer(t *testing.T) {
	realServer(t)
	a, err := redisserver.Start(t.TempDir())
	require.NoError(t, err)
	defer a.Kill()
	b, err := redisserver.Start(t.TempDir())
	require.NoError(t, err)
	defer b.Kill()
	b.Kill()
	b.Addr = a.Addr // as if another process took b's port while b was down
	err = b.Restart()
	require.Error(t, err, "Restart returned with another server on its port")
	require.ErrorContains(t, err, "exited before it answered")
	require.Zero(t, b.Pid(), "nothing of b is left running")
	require.NoError(t, a.Stop(), "the other server is untouched")
}
