package redisserver

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// resp encodes one command as the server writes it to its AOF.
func resp(args ...string) string {
	var b strings.Builder
	b.WriteString("*" + strconv.Itoa(len(args)) + "\r\n")
	for _, a := range args {
		b.WriteString("$" + strconv.Itoa(len(a)) + "\r\n" + a + "\r\n")
	}
	return b.String()
}

// TestOpenMulti: the offset of a MULTI left open at the end of an incr
// AOF, whether its last command is complete or torn, and -1 for a file
// that ends outside a block (cleanly, or torn where the server's own
// truncation is right).
func TestOpenMulti(t *testing.T) {
	set := resp("SET", "k", "v\r\nwith a CRLF inside")
	sel := resp("SELECT", "0")
	multi, exec := resp("MULTI"), resp("EXEC")
	torn := resp("SET", "torn", "value")
	for _, tc := range []struct {
		name string
		aof  string
		want int
	}{
		{"empty", "", -1},
		{"clean end", sel + set + set, -1},
		{"complete MULTI..EXEC", sel + multi + set + set + exec, -1},
		{"MULTI, complete commands, torn command", sel + multi + set + set + torn[:len(torn)-4], len(sel)},
		{"MULTI, complete commands, no torn command", sel + multi + set + set, len(sel)},
		{"torn inside an argument's length line", sel + multi + set + torn[:strings.Index(torn, "$5")+2], len(sel)},
		{"torn inside an argument count line", sel + multi + set + "*3\r", len(sel)},
		{"torn before the CRLF that ends an argument", sel + multi + set + torn[:len(torn)-1], len(sel)},
		{"torn inside MULTI itself", sel + set + multi[:len(multi)-3], -1},
		{"torn command outside a block", sel + multi + set + exec + torn[:9], -1},
		{"two blocks, only the last open", sel + multi + set + exec + set + multi + set, len(sel + multi + set + exec + set)},
		{"annotations", "#TS:1733600000\r\n" + multi + set + "#TS:1733600001\r\n" + exec + "#TS:17", -1},
		{"annotation inside an open block", sel + multi + "#TS:1733600000\r\n" + set, len(sel)},
		{"argument length past any file", sel + multi + "*1\r\n$9223372036854775807\r\nSET", len(sel)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := openMulti([]byte(tc.aof))
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

// TestOpenMultiEveryCut: cut a file of plain commands and blocks at every
// byte; the answer is the MULTI of the last block whose MULTI is whole in
// the cut and whose EXEC is not.
func TestOpenMultiEveryCut(t *testing.T) {
	cmds := [][]string{{"SELECT", "0"}, {"SET", "a", "1"}, {"MULTI"}, {"SET", "b", ""},
		{"HSET", "h", "f", "x\r\ny"}, {"EXEC"}, {"DEL", "a"}, {"MULTI"}, {"SET", "c", "3"},
		{"EXEC"}, {"MULTI"}, {"INCR", "n"}, {"ZADD", "z", "1", "m"}, {"EXEC"}}
	var aof string
	var ends []int // ends[i] is where command i ends
	for _, c := range cmds {
		aof += resp(c...)
		ends = append(ends, len(aof))
	}
	for cut := 0; cut <= len(aof); cut++ {
		want, start := -1, 0
		for i, c := range cmds {
			if ends[i] > cut {
				break
			}
			switch c[0] {
			case "MULTI":
				want = start
			case "EXEC":
				want = -1
			}
			start = ends[i]
		}
		got, err := openMulti([]byte(aof[:cut]))
		require.NoError(t, err, "cut at %d", cut)
		require.Equal(t, want, got, "cut at %d: %q", cut, aof[:cut])
	}
}

// TestOpenMultiRefuses: a file the server would not have written is an
// error, not a guess.
func TestOpenMultiRefuses(t *testing.T) {
	for _, tc := range []struct{ name, aof string }{
		{"RDB preamble", "REDIS0010\xfa\x09redis-ver"},
		{"nested MULTI", resp("MULTI") + resp("SET", "a", "1") + resp("MULTI")},
		{"EXEC without MULTI", resp("SET", "a", "1") + resp("EXEC")},
		{"not an array", "+OK\r\n"},
		{"empty array", "*0\r\n"},
		{"bad argument length", "*1\r\n$x\r\nMULTI\r\n"},
		{"argument not ended by CRLF", "*1\r\n$5\r\nMULTIxx"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := openMulti([]byte(tc.aof))
			require.ErrorIs(t, err, ErrAOF)
		})
	}
}

// aofDir writes a manifest and files (name to contents) into a server's
// appendonlydir and returns a Server of that directory.
func aofDir(t *testing.T, manifest string, files map[string]string) *Server {
	t.Helper()
	s := &Server{Dir: t.TempDir()}
	dir := filepath.Join(s.Dir, defaultAOFDir)
	require.NoError(t, os.Mkdir(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, defaultAOFName+".manifest"), []byte(manifest), 0o644))
	for name, data := range files {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644))
	}
	return s
}

// TestRepairAOF: the repair reads the manifest, cuts the last incr file
// only, and leaves a clean one, a server with no AOF, or one with no
// incr file alone.
func TestRepairAOF(t *testing.T) {
	const manifest = "file appendonly.aof.1.base.rdb seq 1 type b\n" +
		"file appendonly.aof.1.incr.aof seq 1 type h\n" +
		"file appendonly.aof.2.incr.aof seq 2 type i\n" +
		"file appendonly.aof.3.incr.aof seq 3 type i\n"
	kept := resp("SET", "a", "1") + resp("MULTI") + resp("SET", "b", "2") + resp("EXEC")
	open := resp("MULTI") + resp("SET", "c", "3")
	files := map[string]string{
		"appendonly.aof.1.base.rdb": "REDIS0010 not read",
		"appendonly.aof.2.incr.aof": resp("MULTI") + resp("SET", "x", "1"), // not the last: left as is
		"appendonly.aof.3.incr.aof": kept + open,
	}
	read := func(s *Server, name string) string {
		b, err := os.ReadFile(filepath.Join(s.Dir, defaultAOFDir, name))
		require.NoError(t, err)
		return string(b)
	}

	t.Run("open block cut", func(t *testing.T) {
		s := aofDir(t, manifest, files)
		cut, err := s.repairAOF()
		require.NoError(t, err)
		require.True(t, cut)
		require.Equal(t, kept, read(s, "appendonly.aof.3.incr.aof"))
		require.Equal(t, files["appendonly.aof.2.incr.aof"], read(s, "appendonly.aof.2.incr.aof"))
		cut, err = s.repairAOF()
		require.NoError(t, err)
		require.False(t, cut, "a repaired file is clean")
	})
	t.Run("clean file left alone", func(t *testing.T) {
		s := aofDir(t, manifest, map[string]string{"appendonly.aof.3.incr.aof": kept})
		cut, err := s.repairAOF()
		require.NoError(t, err)
		require.False(t, cut)
		require.Equal(t, kept, read(s, "appendonly.aof.3.incr.aof"))
	})
	t.Run("named directory and file", func(t *testing.T) {
		s := &Server{Dir: t.TempDir(), args: []string{"redis-server", "--appenddirname", "d", "--appendfilename", "q.aof"}}
		require.NoError(t, os.Mkdir(filepath.Join(s.Dir, "d"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(s.Dir, "d", "q.aof.manifest"), []byte("file q.aof.1.incr.aof seq 1 type i\n"), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(s.Dir, "d", "q.aof.1.incr.aof"), []byte(kept+open), 0o644))
		cut, err := s.repairAOF()
		require.NoError(t, err)
		require.True(t, cut)
	})
	t.Run("comment lines and keys in capitals", func(t *testing.T) {
		m := "# written by hand\nFILE appendonly.aof.3.incr.aof SEQ 3 TYPE i\n"
		s := aofDir(t, m, map[string]string{"appendonly.aof.3.incr.aof": kept + open})
		cut, err := s.repairAOF()
		require.NoError(t, err)
		require.True(t, cut)
		require.Equal(t, kept, read(s, "appendonly.aof.3.incr.aof"))
	})
	t.Run("no AOF", func(t *testing.T) {
		cut, err := (&Server{Dir: t.TempDir()}).repairAOF()
		require.NoError(t, err)
		require.False(t, cut)
	})
	t.Run("no incr file", func(t *testing.T) {
		s := aofDir(t, "file appendonly.aof.1.base.rdb seq 1 type b\n", nil)
		cut, err := s.repairAOF()
		require.NoError(t, err)
		require.False(t, cut)
	})
	t.Run("incr file missing", func(t *testing.T) {
		_, err := aofDir(t, manifest, nil).repairAOF()
		require.ErrorIs(t, err, os.ErrNotExist)
	})
	t.Run("malformed manifest", func(t *testing.T) {
		for _, m := range []string{"file a seq 1 type\n", "seq 1 type i\n", "file \"a b\" seq 1 type i\n"} {
			_, err := aofDir(t, m, nil).repairAOF()
			require.ErrorIs(t, err, ErrAOF, "%q", m)
		}
	})
	t.Run("malformed incr file", func(t *testing.T) {
		_, err := aofDir(t, manifest, map[string]string{"appendonly.aof.3.incr.aof": "+OK\r\n"}).repairAOF()
		require.ErrorIs(t, err, ErrAOF)
	})
}
