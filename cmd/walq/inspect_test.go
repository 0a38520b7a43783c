package main_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
)

// statsJSON is the part of stats --json the tests read.
type statsJSON struct {
	Ready     int64  `json:"ready"`
	InFlight  int64  `json:"in_flight"`
	Delayed   int64  `json:"delayed"`
	Dead      int64  `json:"dead"`
	LiveBytes int64  `json:"live_bytes"`
	LogBytes  int64  `json:"log_bytes"`
	OldestAt  string `json:"oldest_enqueued_at"`
	Segments  []struct {
		Path     string
		FirstLSN uint64 `json:"first_lsn"`
		Bytes    int64
	}
	Snapshots []struct {
		Path  string
		LSN   uint64
		Bytes int64
	}
	Sync       string
	Totals     struct{ Enqueued, Acked uint64 }
	Kind       string `json:"kind"`
	SortKey    string `json:"sort_key"`
	InUse      bool   `json:"in_use"`
	CleanClose bool   `json:"clean_close"`
	Sorted     *struct {
		Pending, Keys, Dead int
		Batches             int `json:"leased_batches"`
	} `json:"sorted"`
}

// stats runs stats --json on dir and decodes it.
func stats(t *testing.T, dir string) statsJSON {
	t.Helper()
	r := mustWalq(t, 0, "", "stats", "--json", dir)
	var s statsJSON
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &s), r.stdout)
	return s
}

func TestStats(t *testing.T) {
	dir := cleanQueue(t, 60)
	s := stats(t, dir)
	require.EqualValues(t, 60, s.Ready)
	require.EqualValues(t, 60, s.Totals.Enqueued)
	require.NotEmpty(t, s.OldestAt)
	require.Greater(t, len(s.Segments), 1, "a 4 KiB segment size gives several segments")
	var sum int64
	for _, sg := range s.Segments {
		require.FileExists(t, sg.Path)
		sum += sg.Bytes
	}
	require.Equal(t, s.LogBytes, sum)
	require.Greater(t, s.LiveBytes, int64(0))
	require.Len(t, s.Snapshots, 1, "Close takes a snapshot")
	require.Equal(t, "always", s.Sync)

	r := mustWalq(t, 0, "", "stats", dir)
	for _, want := range []string{"ready       60", "in flight   0", "dead        0", "oldest ", "segments and 1 snapshot",
		"first LSN 1", "snapshot-", "lifetime", "enqueued 60"} {
		require.Contains(t, r.stdout, want)
	}
	require.Empty(t, r.stderr)
}

// TestStatsAfterCrash: stats shows a crashed queue as it was left, leases
// and all, and leaves their end to the next open.
func TestStatsAfterCrash(t *testing.T) {
	dir := crashedQueue(t, 10)
	r := mustWalq(t, 0, "", "stats", "--json", dir)
	require.Contains(t, r.stderr, "the queue was not closed cleanly; its leases end when it is next opened")
	var s statsJSON
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &s))
	require.EqualValues(t, 8, s.Ready)
	require.EqualValues(t, 2, s.InFlight)
	require.False(t, s.CleanClose)
	require.Equal(t, "ack", s.Kind)
}

// dumpLine is one line of dump.
type dumpLine struct {
	LSN        uint64            `json:"lsn"`
	Op         string            `json:"op"`
	Seq        uint64            `json:"seq"`
	Lease      uint64            `json:"lease"`
	ID         string            `json:"id"`
	Size       int               `json:"size"`
	At         string            `json:"at"`
	Due        string            `json:"due"`
	Reason     string            `json:"reason"`
	Headers    map[string]string `json:"headers"`
	PayloadLen *int              `json:"payload_bytes"`
	Payload    *string           `json:"payload"`
	Encoding   string            `json:"payload_encoding"`
}

func TestDump(t *testing.T) {
	dir := deadQueue(t)
	r := mustWalq(t, 0, "", "dump", dir)
	require.Empty(t, r.stderr, "no progress bar when stderr is not a terminal")
	lines := jsonLines[dumpLine](t, r.stdout)
	var ops []string
	for i, l := range lines {
		ops = append(ops, l.Op)
		require.NotZero(t, l.Size)
		require.NotEmpty(t, l.At)
		if i > 0 {
			require.Equal(t, lines[i-1].LSN+1, l.LSN, "LSNs follow on")
		}
	}
	require.Equal(t, []string{"enqueue", "enqueue", "enqueue", "lease", "dead", "lease", "dead", "close"}, ops)
	enq := lines[0]
	require.Equal(t, "dead-1", enq.ID)
	require.Equal(t, enq.LSN, enq.Seq, "an enqueue's seq is its LSN")
	require.Equal(t, "body of dead-1", *enq.Payload)
	require.Equal(t, "text", enq.Encoding)
	require.Equal(t, len("body of dead-1"), *enq.PayloadLen)
	require.Equal(t, "poison 1", lines[4].Reason)
	require.Equal(t, lines[3].LSN, lines[4].Lease, "the dead record names its lease")
	require.NotEmpty(t, lines[3].Due, "a lease has a deadline")
}

func TestDumpRangeAndPayloads(t *testing.T) {
	dir := cleanQueue(t, 30)
	all := jsonLines[dumpLine](t, mustWalq(t, 0, "", "dump", dir).stdout)
	require.Len(t, all, 31, "30 enqueues and a close")
	require.Equal(t, map[string]string{"n": "0"}, all[0].Headers)

	tests := []struct {
		name  string
		args  []string
		first uint64
		n     int
	}{
		{"from", []string{"--from", "25"}, 25, 7},
		{"from to", []string{"--from", "5", "--to", "9"}, 5, 5},
		{"limit", []string{"--limit", "3"}, 1, 3},
		{"to past the end", []string{"--to", "1000"}, 1, 31},
		{"flags after DIR", []string{"--limit", "2", "--from", "10"}, 10, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := jsonLines[dumpLine](t, mustWalq(t, 0, "", append(append([]string{"dump"}, tt.args...), dir)...).stdout)
			require.Len(t, got, tt.n)
			require.Equal(t, tt.first, got[0].LSN)
		})
	}
	t.Run("no payload", func(t *testing.T) {
		r := mustWalq(t, 0, "", "dump", "--payload=false", "--limit", "1", dir)
		require.NotContains(t, r.stdout, `"payload"`)
		l := jsonLines[dumpLine](t, r.stdout)[0]
		require.Nil(t, l.Payload)
		require.Equal(t, len(fmt.Sprintf("payload %03d %s", 0, strings.Repeat("x", 80))), *l.PayloadLen)
	})
}

func TestDumpBinaryPayload(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "q")
	bin := "\x00\x01\xff binary"
	mustWalq(t, 0, bin, "enqueue", "--id", "b", dir)
	l := jsonLines[dumpLine](t, mustWalq(t, 0, "", "dump", "--limit", "1", dir).stdout)[0]
	require.Equal(t, "base64", l.Encoding)
	got, err := base64.StdEncoding.DecodeString(*l.Payload)
	require.NoError(t, err)
	require.Equal(t, bin, string(got))
}

func TestVerify(t *testing.T) {
	tests := []struct {
		name string
		dir  func(t *testing.T) string
		code int
		want []string
	}{
		{"clean", func(t *testing.T) string { return cleanQueue(t, 20) }, 0,
			[]string{"snapshot  snapshot-", "checksum ok", "result: clean"}},
		{"with dead letters", deadQueue, 0, []string{"result: clean"}},
		{"crashed", func(t *testing.T) string { return crashedQueue(t, 10) }, 0,
			[]string{"records replayed", "result: clean"}},
		{"torn tail", tornQueue, 7,
			[]string{"torn tail segment ", "/log/", " offset ", "torn write", "result: torn tail, repairable"}},
		{"corrupt", corruptQueue, 2,
			[]string{"damaged   segment ", "/log/00000000000000000001 offset ", "CRC mismatch", "result: corrupt; 'walq repair "}},
		{"corrupt snapshot", corruptSnapshot, 2, []string{"corrupt   ", "snapshot-", "checksum mismatch"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := tt.dir(t)
			before := treeDigest(t, dir)
			r := mustWalq(t, tt.code, "", "verify", dir)
			for _, w := range tt.want {
				require.Contains(t, r.stdout, w)
			}
			require.Equal(t, before, treeDigest(t, dir), "verify changes nothing")
		})
	}
}

func TestRepairTornTail(t *testing.T) {
	dir := tornQueue(t)
	before := treeDigest(t, dir)
	r := mustWalq(t, 0, "", "repair", dir)
	require.Contains(t, r.stdout, "cut torn tail: segment ")
	require.Regexp(t, `offset \d+: \d+ bytes, 1 entry, LSN \d+`, r.stdout)
	require.Contains(t, r.stdout, "result: repaired; verify finds it clean")
	backups, err := filepath.Glob(dir + ".bak-*")
	require.NoError(t, err)
	require.Len(t, backups, 1)
	require.Contains(t, r.stdout, "backup: copied ")
	require.Equal(t, before, treeDigest(t, backups[0]), "the backup is the directory before the repair")
	mustWalq(t, 0, "", "verify", dir)
	require.EqualValues(t, 40, stats(t, dir).Ready, "the torn entry held the lease records, not messages")
}

func TestRepairBackupPath(t *testing.T) {
	dir := tornQueue(t)
	backup := filepath.Join(t.TempDir(), "saved")
	r := mustWalq(t, 0, "", "repair", "--backup", backup, dir)
	require.Contains(t, r.stdout, "to "+backup)
	require.DirExists(t, filepath.Join(backup, "log"))
	t.Run("backup inside DIR refused", func(t *testing.T) {
		dir := tornQueue(t)
		r := mustWalq(t, 1, "", "repair", "--backup", filepath.Join(dir, "bak"), dir)
		require.Contains(t, r.stderr, "is inside")
		mustWalq(t, 7, "", "verify", dir)
	})
	t.Run("existing backup path refused", func(t *testing.T) {
		dir := tornQueue(t)
		r := mustWalq(t, 1, "", "repair", "--backup", backup, dir)
		require.Contains(t, r.stderr, "already exists")
		mustWalq(t, 7, "", "verify", dir) // still torn: nothing was changed
	})
}

// TestRepairThroughSymlink: a queue directory reached through a symbolic
// link (a data volume mounted elsewhere) is backed up and repaired as the
// directory itself, and a backup path inside it by its other name is
// refused as inside it.
func TestRepairThroughSymlink(t *testing.T) {
	dir := tornQueue(t)
	link := filepath.Join(t.TempDir(), "jobs")
	require.NoError(t, os.Symlink(dir, link))
	before := treeDigest(t, dir)

	r := mustWalq(t, 1, "", "repair", "--backup", filepath.Join(dir, "bak"), link)
	require.Contains(t, r.stderr, "is inside")
	require.NoDirExists(t, filepath.Join(dir, "bak"))

	backup := filepath.Join(t.TempDir(), "saved")
	r = mustWalq(t, 0, "", "repair", "--backup", backup, link)
	require.Contains(t, r.stdout, "result: repaired; verify finds it clean")
	require.Equal(t, before, treeDigest(t, backup), "the backup is the directory before the repair")
	mustWalq(t, 0, "", "verify", dir)
}

func TestRepairClean(t *testing.T) {
	dir := cleanQueue(t, 5)
	r := mustWalq(t, 0, "", "repair", dir)
	require.Contains(t, r.stdout, "nothing to repair")
	backups, _ := filepath.Glob(dir + ".bak-*")
	require.Empty(t, backups)
}

// TestRepairCorrupt: damage in a sealed segment is backed up, reported
// exactly, cut out of the directory for good, and verify then finds it
// clean.
func TestRepairCorrupt(t *testing.T) {
	dir := corruptQueue(t)
	r := mustWalq(t, 0, "", "repair", dir)
	require.Regexp(t, `skipped: segment \S+/log/00000000000000000001 offset \d+: \d+ bytes, 1 entry, LSN \d+ \(CRC mismatch\)`, r.stdout)
	require.Contains(t, r.stdout, "rewritten: ")
	require.Contains(t, r.stdout, "result: repaired; verify finds it clean")
	backups, _ := filepath.Glob(dir + ".bak-*")
	require.Len(t, backups, 1)
	mustWalq(t, 0, "", "verify", dir)
}

// TestRepairCorruptSnapshot: a damaged snapshot is set aside and the state
// rebuilt by replaying the log, which still reaches back to LSN 1.
func TestRepairCorruptSnapshot(t *testing.T) {
	dir := corruptSnapshot(t)
	before := treeDigest(t, dir)
	r := mustWalq(t, 0, "", "repair", dir)
	require.Contains(t, r.stdout, "snapshot set aside: ")
	require.Contains(t, r.stdout, "result: repaired; verify finds it clean")
	backups, _ := filepath.Glob(dir + ".bak-*")
	require.Len(t, backups, 1)
	require.Equal(t, before, treeDigest(t, backups[0]), "the backup is the directory before the repair")
	mustWalq(t, 0, "", "verify", dir)
	require.EqualValues(t, 5, stats(t, dir).Ready, "the log held every message")
}

// corruptSnapshot returns a queue directory whose snapshot has a byte
// changed.
func corruptSnapshot(t *testing.T) string {
	t.Helper()
	dir := cleanQueue(t, 5)
	snaps, err := filepath.Glob(filepath.Join(dir, "snapshot-*"))
	require.NoError(t, err)
	require.Len(t, snaps, 1)
	b, err := os.ReadFile(snaps[0])
	require.NoError(t, err)
	b[len(b)-1] ^= 0x01
	require.NoError(t, os.WriteFile(snaps[0], b, 0o600))
	return dir
}

// treeDigest returns every file under dir with its contents, except the
// lock file, to compare trees.
func treeDigest(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	require.NoError(t, filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() == "LOCK" {
			return err
		}
		b, err := os.ReadFile(path)
		rel, _ := filepath.Rel(dir, path)
		out[rel] = string(b)
		return err
	}))
	return out
}

// TestVerifyExitCodes: a torn tail, damage and a check that cannot run
// have exit statuses of their own.
func TestVerifyExitCodes(t *testing.T) {
	mustWalq(t, 7, "", "verify", tornQueue(t))
	mustWalq(t, 2, "", "verify", corruptQueue(t))
	mustWalq(t, 1, "", "verify", filepath.Join(t.TempDir(), "none"))
}

func TestVerifyJSON(t *testing.T) {
	for _, tt := range []struct {
		dir    func(*testing.T) string
		code   int
		result string
	}{
		{func(t *testing.T) string { return cleanQueue(t, 3) }, 0, "clean"},
		{tornQueue, 7, "torn"},
		{corruptQueue, 2, "corrupt"},
	} {
		t.Run(tt.result, func(t *testing.T) {
			r := mustWalq(t, tt.code, "", "verify", "--json", tt.dir(t))
			c := jsonLines[verifyOut](t, r.stdout)[0]
			require.Equal(t, tt.result, c.Result)
			require.Equal(t, tt.result == "torn", c.Torn != nil)
			require.Equal(t, tt.result == "corrupt", len(c.Damaged) > 0)
		})
	}
}

// TestRepairJSON: repair --json says what was lost, and the directory then
// verifies clean.
func TestRepairJSON(t *testing.T) {
	dir := corruptQueue(t)
	r := mustWalq(t, 0, "", "repair", "--json", dir)
	j := jsonLines[repairOut](t, r.stdout)[0]
	require.Equal(t, "repaired", j.Result)
	require.True(t, j.Repaired)
	require.Equal(t, "corrupt", j.Before.Result)
	require.Equal(t, "clean", j.After.Result)
	require.NotEmpty(t, j.LostLSNs)
	require.DirExists(t, j.Backup)
	mustWalq(t, 0, "", "verify", dir)
}

// TestRepairMissingSegment: a segment deleted by hand in the middle of the
// log is damage for verify, and repair makes the queue open clean.
func TestRepairMissingSegment(t *testing.T) {
	dir := cleanQueue(t, 200)
	segs := segments(t, dir)
	require.Greater(t, len(segs), 3)
	require.NoError(t, os.Remove(segs[len(segs)/2]))
	mustWalq(t, 2, "", "verify", dir)
	r := mustWalq(t, 0, "", "repair", dir)
	require.Contains(t, r.stdout, "lost LSNs: ")
	mustWalq(t, 0, "", "verify", dir)
	mustWalq(t, 0, "", "stats", dir)
}

// verifyOut is the part of verify --json the tests read.
type verifyOut struct {
	Result  string          `json:"result"`
	Torn    *map[string]any `json:"torn"`
	Damaged []any           `json:"damaged"`
}

// repairOut is the part of repair --json the tests read.
type repairOut struct {
	Result   string      `json:"result"`
	Repaired bool        `json:"repaired"`
	Backup   string      `json:"backup"`
	Before   verifyOut   `json:"before"`
	After    *verifyOut  `json:"after"`
	LostLSNs [][2]uint64 `json:"lost_lsns"`
}

// TestSnapshotDeleted: a snapshot deleted by hand after the log was
// truncated is damage (exit 2, not the torn-tail status), and repair
// rebuilds what the log still holds and succeeds.
func TestSnapshotDeleted(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "q")
	q, err := queue.Open(dir, fixtureOptions())
	require.NoError(t, err)
	for i := range 200 {
		_, err := q.Enqueue(context.Background(), []byte(fmt.Sprintf("payload %03d %s", i, strings.Repeat("x", 80))))
		require.NoError(t, err)
	}
	for range 150 {
		m, err := q.TryDequeue()
		require.NoError(t, err)
		require.NoError(t, m.Ack())
	}
	require.NoError(t, q.Compact())
	require.NoError(t, q.Close())
	snaps, err := filepath.Glob(filepath.Join(dir, "snapshot-*"))
	require.NoError(t, err)
	require.Len(t, snaps, 1)
	require.NoError(t, os.Remove(snaps[0]))
	r := mustWalq(t, 2, "", "verify", dir)
	require.Contains(t, r.stdout, "there is no snapshot")
	r = mustWalq(t, 0, "", "repair", dir)
	require.Contains(t, r.stdout, "result: repaired")
	mustWalq(t, 0, "", "verify", dir)
	require.EqualValues(t, 50, stats(t, dir).Ready, "the 50 messages never delivered are in the log")
}
