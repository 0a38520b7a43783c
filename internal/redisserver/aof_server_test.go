//go:build !windows

package redisserver_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/internal/redisserver"
)

// manyWrites is a script that writes keys k1..kN (N its first argument)
// in one call: the server logs its effects as one MULTI..EXEC block.
const manyWrites = "for i = 1, tonumber(ARGV[1]) do redis.call('SET', 'k' .. i, i) end"

// TestRestartCutsATornBlock: a call whose block of writes a kill tore is
// all or nothing for the data, across the start that truncates the AOF
// and the one after, and the writes made between survive.
//
// The test tears the block on purpose: it stops the server after a
// script of 40 writes, cuts the incr AOF in the middle of one of its
// SETs (found by parsing, not by timing a kill), then restarts, writes,
// kills, restarts. Redis 7.0 (7.0.15 seen) truncates such a file after
// the last complete SET, inside the block, and appends the next writes
// after the open MULTI: the start after that replays the half block
// with them ("MULTI calls can not be nested" in its log), so k1..kM are
// there. The same directory started without Restart's repair shows it;
// it is asserted on 7.0.15 only, and logged elsewhere (a fixed server,
// valkey-io/valkey PR #4342, drops the half block itself).
func TestRestartCutsATornBlock(t *testing.T) {
	s, complete, control := tornServer(t)
	defer s.Kill()
	restartAroundKill(t, s, writeAfter)
	want := []string{"a1", "a2", "after", "before"}
	require.Equal(t, want, keys(t, s.Addr), "the torn call left nothing, the later writes are all there")

	half := unrepaired(t, control, writeAfter)
	t.Logf("%d of the block's SETs whole after the cut; without the repair the server ends with %v", complete, half)
	for i := 1; i <= complete; i++ {
		want = append(want, "k"+strconv.Itoa(i))
	}
	slices.Sort(want)
	if v := version(t, s.Addr); v == "7.0.15" {
		require.Equal(t, want, half, "Redis %s replays the %d complete SETs of the torn block", v, complete)
	} else {
		t.Logf("Redis %s without the repair: keys %v (7.0.15 gives %v)", v, half, want)
	}
}

// TestRestartKeepsWritesAfterATornBlock: a write acknowledged after the
// start that truncated a torn block survives the next kill.
//
// Redis 7.0 (7.0.15 seen) truncates the torn block inside it and appends
// the next writes after its open MULTI; when only single commands follow
// (no EXEC of a later block), the start after a kill finds the file
// ending inside that block and reverts it, writes and all ("Revert
// incomplete MULTI/EXEC transaction" in its log): an acknowledged SET is
// lost. That is asserted on 7.0.15 only and logged elsewhere; the
// repaired run must keep it on any server.
func TestRestartKeepsWritesAfterATornBlock(t *testing.T) {
	s, _, control := tornServer(t)
	defer s.Kill()
	restartAroundKill(t, s, setC)
	require.Equal(t, []string{"before", "c"}, keys(t, s.Addr), "the SET acknowledged after the torn call survived the kill")
	require.Equal(t, "3", call(t, s.Addr, "GET", "c"))

	lost := unrepaired(t, control, setC)
	if v := version(t, s.Addr); v == "7.0.15" {
		require.Equal(t, []string{"before"}, lost, "Redis %s reverts the acknowledged SET with the open block", v)
	} else {
		t.Logf("Redis %s without the repair: keys %v (7.0.15 gives [before])", v, lost)
	}
}

// tornServer starts a server in a new directory, writes "before" and a
// script's block of 40 SETs, stops it and tears the block mid-SET
// (tearBlock). It returns the stopped server, how many of the block's
// SETs stayed whole, and a copy of the torn directory for a run without
// the repair.
func tornServer(t *testing.T) (*redisserver.Server, int, string) {
	t.Helper()
	realServer(t)
	s, err := redisserver.Start(t.TempDir())
	require.NoError(t, err)
	call(t, s.Addr, "SET", "before", "1")
	call(t, s.Addr, "EVAL", manyWrites, "0", "40")
	require.NoError(t, s.Stop())
	complete := tearBlock(t, s.Dir)
	control := t.TempDir()
	require.NoError(t, os.CopyFS(control, os.DirFS(s.Dir)))
	return s, complete, control
}

// restartAroundKill restarts the torn server s, whose repair must cut the
// open block, makes the writes of write, kills it and restarts it again,
// which must find the file clean.
func restartAroundKill(t *testing.T, s *redisserver.Server, write func(*testing.T, string)) {
	t.Helper()
	require.NoError(t, s.Restart())
	require.Equal(t, 1, s.AOFCuts(), "the restart cut the open block")
	write(t, s.Addr)
	s.Kill()
	require.NoError(t, s.Restart())
	require.Equal(t, 1, s.AOFCuts(), "a file the server truncated itself is clean")
}

// setC writes one plain key, c, acknowledged once the AOF is fsynced
// (the harness's Durable configuration: appendfsync always).
func setC(t *testing.T, addr string) {
	t.Helper()
	require.Equal(t, "OK", call(t, addr, "SET", "c", "3"))
}

// TestCheckAOFFixCutsATornBlock: "redis-check-aof --fix <manifest>", the
// advice the server's log gives, cuts a torn block's file back to before
// its MULTI: the directory it fixed loads without any of the block, and
// the writes made after it survive a kill.
func TestCheckAOFFixCutsATornBlock(t *testing.T) {
	bin, err := exec.LookPath("redis-check-aof")
	require.NoError(t, err, "redis-check-aof comes with redis-server")
	s, _, _ := tornServer(t)
	defer s.Kill()

	fix := exec.Command(bin, "--fix", filepath.Join(s.Dir, "appendonlydir", "appendonly.aof.manifest"))
	fix.Stdin = strings.NewReader("y\n")
	out, err := fix.CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "Successfully truncated AOF")

	fixed, err := redisserver.Start(s.Dir) // the server's own loader only
	require.NoError(t, err)
	defer fixed.Kill()
	require.Equal(t, []string{"before"}, keys(t, fixed.Addr), "the fixed file holds none of the torn call")
	writeAfter(t, fixed.Addr)
	fixed.Kill()
	again, err := redisserver.Start(s.Dir)
	require.NoError(t, err)
	defer again.Kill()
	require.Equal(t, []string{"a1", "a2", "after", "before"}, keys(t, again.Addr), "the writes after the fix survived a kill")
}

// tearBlock cuts the last incr AOF of dir inside a SET in the middle of
// its MULTI..EXEC block and returns how many of the block's SETs remain
// whole.
func tearBlock(t *testing.T, dir string) int {
	t.Helper()
	aof := filepath.Join(dir, "appendonlydir")
	manifest, err := os.ReadFile(filepath.Join(aof, "appendonly.aof.manifest"))
	require.NoError(t, err)
	var incr string
	for _, line := range strings.Split(string(manifest), "\n") {
		if f := strings.Fields(line); len(f) == 6 && f[5] == "i" {
			incr = filepath.Join(aof, f[1])
		}
	}
	data, err := os.ReadFile(incr)
	require.NoError(t, err, "manifest %q", manifest)
	multi := bytes.Index(data, []byte("*1\r\n$5\r\nMULTI\r\n"))
	exec := bytes.Index(data, []byte("*1\r\n$4\r\nEXEC\r\n"))
	require.True(t, multi >= 0 && exec > multi, "the script's writes are one block in the AOF: %q", data)
	set := []byte("*3\r\n$3\r\nSET\r\n")
	mid := multi + (exec-multi)/2
	cut := mid + bytes.Index(data[mid:], set) + len(set) + 2
	require.NoError(t, os.Truncate(incr, int64(cut)))
	return bytes.Count(data[multi:cut], set) - 1
}

// writeAfter writes, to a server started from a torn AOF, a plain key
// and a script's block of two.
func writeAfter(t *testing.T, addr string) {
	t.Helper()
	call(t, addr, "SET", "after", "1")
	call(t, addr, "EVAL", "redis.call('SET', 'a1', 1) redis.call('SET', 'a2', 2)", "0")
}

// unrepaired replays the test in dir with the server's own loader only
// (Start, not Restart: no repair): start, write, kill, start. It returns
// the keys the server ends with.
func unrepaired(t *testing.T, dir string, write func(t *testing.T, addr string)) []string {
	t.Helper()
	s, err := redisserver.Start(dir)
	require.NoError(t, err)
	write(t, s.Addr)
	s.Kill()
	s, err = redisserver.Start(dir)
	require.NoError(t, err)
	defer s.Kill()
	return keys(t, s.Addr)
}

// keys returns the server's keys, sorted.
func keys(t *testing.T, addr string) []string {
	t.Helper()
	var ks []string
	for _, k := range call(t, addr, "KEYS", "*").([]any) {
		ks = append(ks, k.(string))
	}
	slices.Sort(ks)
	return ks
}

// version returns the server's redis_version.
func version(t *testing.T, addr string) string {
	t.Helper()
	for _, l := range strings.Split(call(t, addr, "INFO", "server").(string), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "redis_version:"); ok {
			return v
		}
	}
	t.Fatal("INFO server has no redis_version")
	return ""
}

// call sends one command over a new connection and returns its reply: a
// string for a status, an integer or a bulk string, a []any for an
// array, nil for a nil; an error reply fails the test.
func call(t *testing.T, addr string, args ...string) any {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer c.Close()
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	_, err = c.Write([]byte(b.String()))
	require.NoError(t, err)
	reply, err := readReply(bufio.NewReader(c))
	require.NoError(t, err, "%q", args)
	return reply
}

// readReply reads one RESP2 reply.
func readReply(r *bufio.Reader) (any, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return nil, fmt.Errorf("empty reply line")
	}
	switch line[0] {
	case '+', ':':
		return line[1:], nil
	case '-':
		return nil, fmt.Errorf("error reply %q", line[1:])
	}
	n, err := strconv.Atoi(line[1:])
	if err != nil {
		return nil, fmt.Errorf("reply line %q: %w", line, err)
	}
	switch {
	case n == -1 && (line[0] == '$' || line[0] == '*'):
		return nil, nil // nil
	case line[0] == '$' && n >= 0:
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, err
		}
		return string(buf[:n]), nil
	case line[0] == '*' && n >= 0:
		elems := make([]any, n)
		for i := range elems {
			if elems[i], err = readReply(r); err != nil {
				return nil, err
			}
		}
		return elems, nil
	}
	return nil, fmt.Errorf("reply line %q", line)
}
