package cli

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walq/walq/internal/testhook"
	"github.com/walq/walq/queue"
)

// backupKillEnv selects the child of TestBackupKilledLeavesNoBackup and
// holds "SRC|DST|FILE": back SRC up to DST and stop after copying FILE.
const backupKillEnv = "WALQ_TEST_BACKUP_KILL_CHILD"

// backupStopped is the line the child prints once it has stopped.
const backupStopped = "backup stopped after a copied file"

// TestBackupKilledLeavesNoBackup: a backup killed (kill -9) after it has
// copied the queue's first segment and not the others leaves nothing under
// the backup's name. A copy of a log cut on a segment boundary reads as a
// clean queue: opened, it would deliver again the messages whose acks are
// in the segments it lacks, and lack the enqueues written there.
func TestBackupKilledLeavesNoBackup(t *testing.T) {
	if spec := os.Getenv(backupKillEnv); spec != "" {
		backupKillChild(t, spec)
		return
	}
	base := t.TempDir()
	src := filepath.Join(base, "q")
	acked := makeAckedQueue(t, src)
	segs, err := os.ReadDir(filepath.Join(src, "log"))
	require.NoError(t, err)
	require.Greater(t, len(segs), 2, "the queue spans several segments")
	first := filepath.Join("log", segs[0].Name())

	dst := filepath.Join(base, "q.bak")
	// The child blocks until it is killed; its own timeout ends it should
	// this test die first.
	cmd := exec.Command(os.Args[0], "-test.run=^TestBackupKilledLeavesNoBackup$", "-test.count=1", "-test.timeout=2m")
	cmd.Env = append(os.Environ(), backupKillEnv+"="+src+"|"+dst+"|"+first)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	stopped := false
	for sc := bufio.NewScanner(out); sc.Scan(); {
		if sc.Text() == backupStopped {
			stopped = true
			break
		}
	}
	if !stopped {
		t.Fatalf("the child ended without stopping mid-backup: %v", cmd.Wait())
	}
	require.NoError(t, cmd.Process.Kill())
	_ = cmd.Wait() // killed: its error says so

	if _, err := os.Lstat(dst); err == nil {
		again := redelivered(t, dst, acked)
		t.Fatalf("a backup killed after copying %s is left under its name %s: opened, it delivers %d acknowledged messages again", first, dst, again)
	}
	_, err = os.Lstat(dst + partialSuffix)
	require.NoError(t, err, "the cut copy is left under its partial name")

	// Run again, the partial copy refuses it by name instead of being
	// taken for a backup; removed, the backup completes.
	_, err = backupDir(&env{}, src, dst)
	require.ErrorContains(t, err, "did not finish")
	require.NoError(t, os.RemoveAll(dst+partialSuffix))
	_, err = backupDir(&env{}, src, dst)
	require.NoError(t, err)
	require.Zero(t, redelivered(t, dst, acked), "the complete backup delivers no acknowledged message")

	// A --backup given with a trailing slash names the same directory.
	slashed := filepath.Join(base, "q.bak2") + string(filepath.Separator)
	_, err = backupDir(&env{}, src, slashed)
	require.NoError(t, err)
	require.Zero(t, redelivered(t, slashed, acked))
}

// backupKillChild backs SRC up and stops for good after copying FILE.
func backupKillChild(t *testing.T, spec string) {
	f := strings.Split(spec, "|")
	require.Len(t, f, 3)
	e := &env{backupCopied: func(rel string) {
		if rel == f[2] {
			fmt.Println(backupStopped)
			select {} // killed here
		}
	}}
	_, err := backupDir(e, f[0], f[1])
	t.Fatalf("the backup finished without copying %s: %v", f[2], err)
}

// makeAckedQueue writes at dir the image a process killed before its
// queue's first compaction leaves (the state repair is run on): a log that
// starts at LSN 1, spans several segments, no snapshot, the acks of its
// first messages in the last segment. It returns the payloads acked.
func makeAckedQueue(t *testing.T, dir string) map[string]bool {
	t.Helper()
	live := filepath.Join(t.TempDir(), "live")
	opts := &queue.Options{SegmentSize: 8 << 10}
	testhook.SetManualCompaction(opts) // the log keeps its first segment
	q, err := queue.Open(live, opts)
	require.NoError(t, err)
	defer q.Close()
	ctx := context.Background()
	for i := range 200 {
		_, err := q.Enqueue(ctx, fmt.Appendf(nil, "message %03d %s", i, strings.Repeat("x", 80)))
		require.NoError(t, err)
	}
	acked := map[string]bool{}
	for range 50 {
		m, err := q.Dequeue(ctx)
		require.NoError(t, err)
		require.NoError(t, m.Ack())
		acked[string(m.Payload)] = true
	}
	require.NoError(t, q.Flush(ctx))
	// The files as they are now, every record synced: what kill -9 leaves
	// (Close would write a snapshot and cut the log).
	require.NoError(t, os.CopyFS(dir, os.DirFS(live)))
	return acked
}

// redelivered opens a copy of the backup at dir and counts the messages it
// delivers that were acked before the backup began.
func redelivered(t *testing.T, dir string, acked map[string]bool) int {
	t.Helper()
	cp := filepath.Join(t.TempDir(), "open")
	require.NoError(t, os.CopyFS(cp, os.DirFS(dir)))
	q, err := queue.Open(cp, nil)
	require.NoError(t, err)
	defer q.Close()
	n := 0
	for {
		m, err := q.TryDequeue()
		if errors.Is(err, queue.ErrEmpty) {
			return n
		}
		require.NoError(t, err)
		if acked[string(m.Payload)] {
			n++
		}
		require.NoError(t, m.Ack())
	}
}

// TestRepairNamesUnfinishedBackups: the copy a repair killed during its
// default backup leaves (DIR.bak-<time>.partial) is named by the next
// repair, whose own default backup has another time and would not meet it.
func TestRepairNamesUnfinishedBackups(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "q")
	q, err := queue.Open(dir, nil)
	require.NoError(t, err)
	require.NoError(t, q.Close())
	left := filepath.Join(base, "q.bak-20260101-000000"+partialSuffix)
	require.NoError(t, os.Mkdir(left, 0o700))
	for _, other := range []string{"q2.bak-20260101-000000" + partialSuffix, "q.bak-20260101-000000"} {
		require.NoError(t, os.Mkdir(filepath.Join(base, other), 0o700)) // another queue's, a finished backup
	}
	var out, errOut bytes.Buffer
	e := &env{stdin: strings.NewReader(""), stdout: &out, stderr: &errOut}
	require.Equal(t, exitOK, run(e, []string{"repair", dir}), "stdout: %s\nstderr: %s", out.String(), errOut.String())
	require.Equal(t, 1, strings.Count(errOut.String(), "walq: note:"), errOut.String())
	require.Contains(t, errOut.String(), left+" is left by a repair that did not finish its backup")
}
