package main_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/walq/walq/queue"
)

// allFiles returns every file under dir, the lock file included, with its
// contents: names and bytes to compare.
func allFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	require.NoError(t, filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		rel, _ := filepath.Rel(dir, path)
		out[rel] = string(b)
		return err
	}))
	return out
}

// sortedQueue returns a closed sorted queue of int64 sort keys with two
// pending values of key "k" and one dead value of key "bad".
func sortedQueue(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "s")
	ctx := context.Background()
	s, err := queue.OpenSorted[int64](dir, &queue.SortedOptions{Options: *fixtureOptions()})
	require.NoError(t, err)
	require.NoError(t, s.Publish(ctx, -7, "bad", []byte("poison value")))
	bs, err := s.TryPull(1)
	require.NoError(t, err)
	require.NoError(t, bs[0].DeadLetter("cannot parse"))
	require.NoError(t, s.Publish(ctx, 42, "k", []byte("forty-two")))
	require.NoError(t, s.Publish(ctx, 43, "k", []byte("forty-three")))
	require.NoError(t, s.Close())
	return dir
}

// TestInspectionWritesNothing: stats, verify, dump and dlq list/show leave
// every file's name and bytes as they were, on a crashed queue (leases
// held, no lock file), one with a torn tail, and a sorted queue.
func TestInspectionWritesNothing(t *testing.T) {
	crashed := func(t *testing.T) string {
		dir := crashedQueue(t, 10)
		require.NoError(t, os.Remove(filepath.Join(dir, "LOCK")))
		return dir
	}
	torn := func(t *testing.T) string {
		dir := deadQueue(t)
		segs, err := filepath.Glob(filepath.Join(dir, "log", "0*"))
		require.NoError(t, err)
		f, err := os.OpenFile(segs[len(segs)-1], os.O_APPEND|os.O_WRONLY, 0)
		require.NoError(t, err)
		_, err = f.Write([]byte{0x30, 1, 2, 3})
		require.NoError(t, err)
		require.NoError(t, f.Close())
		return dir
	}
	cases := []struct {
		name string
		make func(t *testing.T) string
		show string // an id for dlq show
	}{
		{"crashed", crashed, ""},
		{"torn tail", torn, "dead-1"},
		{"sorted", func(t *testing.T) string { return sortedQueue(t) }, "1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := c.make(t)
			before := allFiles(t, dir)
			runs := [][]string{{"stats", dir}, {"stats", "--json", dir}, {"dump", dir}, {"dlq", "list", dir},
				{"dlq", "list", "--json", dir}, {"verify", dir}}
			if c.show != "" {
				runs = append(runs, []string{"dlq", "show", dir, c.show})
			}
			for _, args := range runs {
				r := walq(t, "", args...)
				require.Contains(t, []int{0, 7}, r.code, "walq %v: %s", args, r.stderr) // verify: 7 for a torn tail
				require.Equal(t, before, allFiles(t, dir), "walq %v changed the directory", args)
			}
		})
	}
}

// TestInspectRunning: a queue that another process has open can be
// inspected; the commands say the figures are as of its last write, and
// nothing is written.
func TestInspectRunning(t *testing.T) {
	dir := deadQueue(t)
	q, err := queue.Open(dir, fixtureOptions())
	require.NoError(t, err)
	defer q.Close()
	_, err = q.Enqueue(context.Background(), []byte("x"))
	require.NoError(t, err)
	settle(t, dir)
	before := allFiles(t, dir)
	r := mustWalq(t, 0, "", "stats", "--json", dir)
	require.Contains(t, r.stderr, "another process has "+dir+" open; these figures are as of its last write")
	var s statsJSON
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &s))
	require.True(t, s.InUse)
	require.EqualValues(t, 2, s.Ready)
	require.EqualValues(t, 2, s.Dead)
	note := "another process has " + dir + " open; these figures are as of its last write"
	r = mustWalq(t, 0, "", "dlq", "list", dir)
	require.Contains(t, r.stdout, "dead-2")
	require.Contains(t, r.stderr, note)
	r = mustWalq(t, 0, "", "dlq", "show", dir, "dead-2")
	require.Contains(t, r.stdout, "body of dead-2")
	require.Contains(t, r.stderr, note)
	require.Contains(t, mustWalq(t, 0, "", "dump", dir).stdout, `"op":"enqueue"`)
	require.Equal(t, before, allFiles(t, dir))
}

// TestSortedCLI: stats, dump and dlq understand a sorted queue.
func TestSortedCLI(t *testing.T) {
	dir := sortedQueue(t)
	r := mustWalq(t, 0, "", "stats", dir)
	for _, want := range []string{"kind        sorted, int64 sort keys (format 2)", "pending     2 values in 1 keys",
		"dead        1", "published 3"} {
		require.Contains(t, r.stdout, want)
	}
	s := stats(t, dir)
	require.Equal(t, "sorted", s.Kind)
	require.Equal(t, "int64", s.SortKey)
	require.NotNil(t, s.Sorted)
	require.Equal(t, 2, s.Sorted.Pending)
	require.Equal(t, 1, s.Sorted.Dead)

	lines := strings.Split(strings.TrimSpace(mustWalq(t, 0, "", "dlq", "list", dir).stdout), "\n")
	require.Len(t, lines, 2)
	require.Regexp(t, `^ID\s+SEQ\s+KEY\s+SORT\s+DELIVERIES\s+PUBLISHED\s+BYTES\s+REASON$`, lines[0])
	require.Regexp(t, `^1@\d+\s+1\s+bad\s+-7\s+1\s+\S+\s+12\s+cannot parse$`, lines[1])
	require.Contains(t, mustWalq(t, 0, "", "dlq", "show", dir, "1").stdout, "payload:    12 bytes, text\npoison value")

	type publish struct {
		Op      string `json:"op"`
		Key     string `json:"key"`
		Sort    any    `json:"sort"`
		Payload string `json:"payload"`
	}
	var pubs []publish
	for _, l := range jsonLines[publish](t, mustWalq(t, 0, "", "dump", dir).stdout) {
		if l.Op == "publish" {
			pubs = append(pubs, l)
		}
	}
	require.Equal(t, []publish{{"publish", "bad", -7.0, "poison value"}, {"publish", "k", 42.0, "forty-two"},
		{"publish", "k", 43.0, "forty-three"}}, pubs)

	require.Equal(t, "requeued 1\n", mustWalq(t, 0, "", "dlq", "requeue", dir, "1").stdout)
	require.Equal(t, "purged 0 dead values\n", mustWalq(t, 0, "", "dlq", "purge", "--all", dir).stdout)
	sq, err := queue.OpenSorted[int64](dir, nil)
	require.NoError(t, err)
	defer sq.Close()
	bs, err := sq.TryPull(10)
	require.NoError(t, err)
	require.Equal(t, "bad", bs[0].Key, "the requeued value is pending again, first by its sort key")
}

// TestWindowedCLI: a windowed queue's sort keys are times.
func TestWindowedCLI(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "w")
	w, err := queue.OpenWindowed(dir, &queue.WindowOptions{Window: time.Hour})
	require.NoError(t, err)
	require.NoError(t, w.Publish(context.Background(), "k", []byte("v")))
	require.NoError(t, w.Close())
	require.Contains(t, mustWalq(t, 0, "", "stats", dir).stdout, "kind        windowed, time sort keys")
	require.Regexp(t, `"key":"k","sort":"20\d\d-`, mustWalq(t, 0, "", "dump", dir).stdout)
}

// TestVersion: walq version names the formats, and they are the ones a
// queue it writes carries: the log entry's version byte and the
// snapshot's.
func TestVersion(t *testing.T) {
	out := mustWalq(t, 0, "", "version").stdout
	m := regexp.MustCompile(`(?m)^walq \S+ \(go\S+\)\nformats: directory (\d+), log entry (\d+), snapshot (\d+)\n$`).FindStringSubmatch(out)
	require.NotNil(t, m, out)
	dir := cleanQueue(t, 1)
	id, err := queue.ReadIdentity(dir)
	require.NoError(t, err)
	require.Equal(t, m[1], strconv.Itoa(id.Format))
	segs, err := filepath.Glob(filepath.Join(dir, "log", "0*"))
	require.NoError(t, err)
	seg, err := os.ReadFile(segs[0])
	require.NoError(t, err)
	_, n := binary.Uvarint(seg) // uvarint(len) | CRC (4B) | version (1B)
	require.Equal(t, m[2], strconv.Itoa(int(seg[n+4])))
	snaps, err := filepath.Glob(filepath.Join(dir, "snapshot-*"))
	require.NoError(t, err)
	snap, err := os.ReadFile(snaps[0])
	require.NoError(t, err)
	require.Equal(t, m[3], strconv.Itoa(int(snap[8]))) // after "WALQSNAP"
}

// TestDequeueEndsLine: the text output of dequeue ends with a newline,
// whether the payload does or not.
func TestDequeueEndsLine(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "q")
	mustWalq(t, 0, "", "enqueue", dir, "no newline")
	mustWalq(t, 0, "", "enqueue", dir, "one newline\n")
	require.True(t, strings.HasSuffix(mustWalq(t, 0, "", "dequeue", dir).stdout, "\n\nno newline\n"))
	require.True(t, strings.HasSuffix(mustWalq(t, 0, "", "dequeue", dir).stdout, "\n\none newline\n"))
}
