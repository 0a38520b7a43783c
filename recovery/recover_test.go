package recovery_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/recovery"
	"github.com/walq/walq/wal"
)

// counter is a State whose records are "add", "close" (a clean close) or
// anything else (a record that does not apply); it needs the log from need
// on.
type counter struct {
	n, last, need uint64
	clean         bool
	skipped       []uint64
}

func (c *counter) Apply(lsn uint64, rec []byte) error {
	switch string(rec) {
	case "add":
		c.n++
	case "close":
	default:
		return fmt.Errorf("record %q does not apply", rec)
	}
	c.last, c.clean = lsn, string(rec) == "close"
	return nil
}

func (c *counter) Skip(lsn uint64) { c.last, c.clean, c.skipped = lsn, false, append(c.skipped, lsn) }
func (c *counter) Last() uint64    { return c.last }
func (c *counter) Need() uint64    { return c.need }
func (c *counter) Clean() bool     { return c.clean }

// target is a Target over a log in dir, whose snapshot bodies are
// "n/last/need" and which notes what the procedure asked of it.
type target struct {
	dir       string
	installed *counter
	ended     int      // leases to end: EndLeases returns it
	calls     []string // EndLeases, CopyPast <lsn>
}

func (t *target) NewState() recovery.State { return &counter{need: 1} }

func (t *target) DecodeState(body []byte) (recovery.State, error) {
	c := &counter{}
	if _, err := fmt.Sscanf(string(body), "%d/%d/%d", &c.n, &c.last, &c.need); err != nil {
		return nil, err
	}
	return c, nil
}

func (t *target) OpenLog(start, reach uint64) (*wal.Log, error) {
	return wal.Open(filepath.Join(t.dir, "log"), &wal.Options{SegmentSize: 64, StartLSN: start, MustReach: reach})
}

func (t *target) Install(st recovery.State, _ uint64) { t.installed = st.(*counter) }

func (t *target) EndLeases() (int, int, error) {
	t.calls = append(t.calls, "EndLeases")
	return t.ended, 0, nil
}

func (t *target) CopyPast(lsn uint64) (int, error) {
	t.calls = append(t.calls, "CopyPast "+strconv.FormatUint(lsn, 10))
	return 1, nil
}

// writeLog appends recs to the log of dir, one entry each, then, with
// cut, removes its first segment; it returns the log's first LSN.
func writeLog(t *testing.T, dir string, cut bool, recs ...string) uint64 {
	t.Helper()
	l, err := wal.Open(filepath.Join(dir, "log"), &wal.Options{SegmentSize: 64})
	require.NoError(t, err)
	for _, r := range recs {
		_, c, err := l.Append([]byte(r))
		require.NoError(t, err)
		require.NoError(t, c.Wait())
	}
	if cut {
		segs := l.Segments()
		require.Greater(t, len(segs), 2)
		require.NoError(t, l.TruncateFront(segs[1].FirstLSN))
	}
	first := l.FirstLSN()
	require.NoError(t, l.Close())
	return first
}

func TestRecover(t *testing.T) {
	for _, tc := range []struct {
		name     string
		snapshot string // body of snapshot-2, "" for none
		recs     []string
		cut      bool // the log's first segment is lost
		salvage  bool
		err      error    // an error that wraps it
		errText  string   // an error that says it
		n        uint64   // the installed state's count
		calls    []string // what was asked of the target
		rep      recovery.Report
	}{
		{name: "crash", recs: []string{"add", "add"}, n: 2, calls: []string{"EndLeases"},
			rep: recovery.Report{Replayed: 2, Requeued: 3}},
		{name: "clean close", recs: []string{"add", "close"}, n: 1,
			rep: recovery.Report{Replayed: 2, Clean: true}},
		{name: "snapshot then replay", snapshot: "5/2/1", recs: []string{"add", "add", "add", "close"}, n: 6,
			rep: recovery.Report{SnapshotLSN: 2, Replayed: 2, Clean: true}},
		{name: "snapshot of another LSN", snapshot: "5/1/1", recs: []string{"add", "add"}, err: recovery.ErrCorrupt},
		{name: "snapshot that does not decode", snapshot: "x", recs: []string{"add", "add"}, err: recovery.ErrCorrupt},
		{name: "record that does not apply", recs: []string{"add", "bad", "add"}, errText: `apply LSN 2: record "bad" does not apply`},
		{name: "log front lost", recs: []string{"add", "add", "add", "add", "add", "close"}, cut: true, err: recovery.ErrLogMissing},
		{name: "log front lost, salvaged", recs: []string{"add", "add", "add", "add", "add", "close"}, cut: true, salvage: true,
			calls: []string{"EndLeases", "CopyPast <first>"},
			rep:   recovery.Report{Clean: true, Requeued: 3, Rewritten: 1}},
		{name: "record skipped by a salvage", recs: []string{"add", "bad", "add"}, salvage: true, n: 2,
			calls: []string{"EndLeases"}, rep: recovery.Report{Replayed: 3, Skipped: 1, Requeued: 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			first := writeLog(t, dir, tc.cut, tc.recs...)
			if tc.snapshot != "" {
				_, err := recovery.Write(dir, 2, []byte(tc.snapshot), nil)
				require.NoError(t, err)
			}
			tg := &target{dir: dir, ended: 3}
			log, rep, err := recovery.Recover(nil, dir, tg, tc.salvage)
			if tc.err != nil || tc.errText != "" {
				require.Error(t, err)
				if tc.err != nil {
					require.ErrorIs(t, err, tc.err)
				}
				require.Contains(t, err.Error(), tc.errText)
				require.Nil(t, tg.installed, "nothing is installed")
				return
			}
			require.NoError(t, err)
			defer log.Close()
			want := tc.rep
			if tc.cut { // the records before the log's first LSN are lost
				want.LostBefore = first
				want.Replayed = len(tc.recs) - int(first) + 1
				tc.n = uint64(want.Replayed - 1)
				for i, c := range tc.calls {
					tc.calls[i] = strings.Replace(c, "<first>", strconv.FormatUint(first, 10), 1)
				}
			}
			require.Equal(t, tc.n, tg.installed.n)
			require.Equal(t, tc.calls, tg.calls)
			rep.Log = wal.Report{}
			require.Equal(t, want, rep)
		})
	}
}

// TestLoadSalvaging: a salvage's load (which the read-only preview of a
// salvage shares) returns a sound snapshot as Load does, and sets a
// damaged one aside, with its Info, for an empty state, where Load
// refuses it.
func TestLoadSalvaging(t *testing.T) {
	dir := t.TempDir()
	tg := &target{dir: dir}
	_, err := recovery.Write(dir, 7, []byte("3/7/1"), nil)
	require.NoError(t, err)
	st, lsn, lost, err := recovery.LoadSalvaging(nil, dir, tg)
	require.NoError(t, err)
	require.Equal(t, uint64(7), lsn)
	require.Equal(t, uint64(3), st.(*counter).n)
	require.Zero(t, lost)

	info, err := recovery.Write(dir, 9, []byte("5/8/1"), nil) // not the state as of LSN 9
	require.NoError(t, err)
	_, _, err = recovery.Load(nil, dir, tg)
	require.ErrorIs(t, err, recovery.ErrCorrupt)
	st, lsn, lost, err = recovery.LoadSalvaging(nil, dir, tg)
	require.NoError(t, err)
	require.Zero(t, lsn)
	require.Equal(t, &counter{need: 1}, st)
	require.Equal(t, info, lost)

	_, _, _, err = recovery.LoadSalvaging(nil, filepath.Join(dir, "none"), tg)
	require.Error(t, err, "a directory that cannot be listed is no damage to set aside")
	require.NotErrorIs(t, err, recovery.ErrCorrupt)
}

// TestRecoverFallsBackToOlderSnapshot: a salvage that sets the damaged
// newest snapshot aside rebuilds from the older one the log continues,
// reports it as the snapshot loaded, and replays the log after it.
func TestRecoverFallsBackToOlderSnapshot(t *testing.T) {
	dir := t.TempDir()
	writeLog(t, dir, false, "add", "add", "add", "add", "add", "close")
	putSnapshot(t, dir, 2, "2/2/1")
	lost := putSnapshot(t, dir, 4, "9/3/1") // not the state as of LSN 4
	tg := &target{dir: dir, ended: 3}
	log, rep, err := recovery.Recover(nil, dir, tg, true)
	require.NoError(t, err)
	defer log.Close()
	require.Equal(t, uint64(2), rep.SnapshotLSN)
	require.Equal(t, lost, rep.SnapshotLost)
	require.Zero(t, rep.LostBefore)
	require.Equal(t, 4, rep.Replayed)
	require.Equal(t, uint64(5), tg.installed.n, "the older snapshot's 2 and the log's 3 after it")
}

// TestLoadOlder: the snapshot a salvage falls back to is the newest older
// than the one set aside that passes the checks; without one, an empty
// state.
func TestLoadOlder(t *testing.T) {
	dir := t.TempDir()
	tg := &target{dir: dir}
	for _, s := range []struct {
		lsn  uint64
		body string
	}{{3, "1/3/1"}, {5, "2/5/1"}, {6, "7/2/1"}, {8, "4/8/1"}} { // 6 is damaged
		putSnapshot(t, dir, s.lsn, s.body)
	}
	for _, tc := range []struct {
		lost, lsn, n uint64
	}{
		{lost: 8, lsn: 5, n: 2}, // 6 is passed over
		{lost: 6, lsn: 5, n: 2},
		{lost: 5, lsn: 3, n: 1}, // only snapshots older than the one set aside
		{lost: 3, lsn: 0, n: 0},
	} {
		st, lsn, err := recovery.LoadOlder(nil, dir, tg, recovery.Info{LSN: tc.lost})
		require.NoError(t, err)
		require.Equal(t, tc.lsn, lsn, "snapshot %d set aside", tc.lost)
		require.Equal(t, tc.n, st.(*counter).n, "snapshot %d set aside", tc.lost)
	}
	_, _, err := recovery.LoadOlder(nil, filepath.Join(dir, "none"), tg, recovery.Info{LSN: 8})
	require.Error(t, err, "a directory that cannot be listed is no damage to pass over")
}

// TestRecoverFallsBackPastLostFront: the damaged newest snapshot is set
// aside and the log's first segment is gone, so the log no longer
// continues the older snapshot. What that snapshot holds is still true: the
// salvage rebuilds from it, not from an empty state, notes where the log
// starts (LostBefore), replays from there, and copies past the loss.
func TestRecoverFallsBackPastLostFront(t *testing.T) {
	dir := t.TempDir()
	first := writeLog(t, dir, true, "add", "add", "add", "add", "add", "add", "add", "close")
	require.Greater(t, first, uint64(3), "the log must start past the older snapshot's LSN+1")
	putSnapshot(t, dir, 2, "2/2/1")
	lost := putSnapshot(t, dir, first, "9/3/1") // not the state as of its LSN
	tg := &target{dir: dir, ended: 3}
	log, rep, err := recovery.Recover(nil, dir, tg, true)
	require.NoError(t, err)
	defer log.Close()
	require.Equal(t, uint64(2), rep.SnapshotLSN, "the older snapshot, not an empty state")
	require.Equal(t, lost, rep.SnapshotLost)
	require.Equal(t, first, rep.LostBefore)
	replayed := 8 - int(first) + 1
	require.Equal(t, replayed, rep.Replayed)
	require.Equal(t, uint64(2+replayed-1), tg.installed.n, "the older snapshot's 2 and the adds the log still holds")
	require.Equal(t, []string{"EndLeases", "CopyPast " + strconv.FormatUint(first, 10)}, tg.calls)
}

// putSnapshot writes the snapshot of body at lsn into dir as Write would,
// but leaves the older ones in place (as a crash between Write's rename
// and its removal of them does), and returns its Info.
func putSnapshot(t *testing.T, dir string, lsn uint64, body string) recovery.Info {
	t.Helper()
	b := recovery.Encode(lsn, []byte(body))
	path := filepath.Join(dir, recovery.Name(lsn))
	require.NoError(t, os.WriteFile(path, b, 0o600))
	return recovery.Info{Path: path, LSN: lsn, Bytes: int64(len(b))}
}
