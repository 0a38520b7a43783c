package wal

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// TestCommitChannels: the channels a Commit hands out (Done, Written) are
// closed once the commit completes, whether they were asked for before
// the completion, after it, or while it ran (under -race, the last case
// also checks the lock-free hand-over of the channels), and the outcome is
// the one the completion set.
func TestCommitChannels(t *testing.T) {
	errFail := errors.New("failed")
	bits := []uint32{stateWritten, stateDone, stateWritten, stateDone}
	for _, tc := range []struct {
		name    string
		durable bool
		err     error
		ask     func(c *Commit, finish func()) []<-chan struct{}
	}{
		{"asked before", false, nil, func(c *Commit, finish func()) []<-chan struct{} {
			chans := askAll(c, bits)
			finish()
			return chans
		}},
		{"asked after", true, nil, func(c *Commit, finish func()) []<-chan struct{} {
			finish()
			return askAll(c, bits)
		}},
		{"asked while it completes", true, errFail, func(c *Commit, finish func()) []<-chan struct{} {
			var wg sync.WaitGroup
			start := make(chan struct{})
			chans := make([]<-chan struct{}, len(bits))
			for i, bit := range bits {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					chans[i] = c.channel(bit)
				}()
			}
			close(start)
			finish()
			wg.Wait()
			return chans
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for range 1000 {
				c := &Commit{durable: tc.durable}
				for _, ch := range tc.ask(c, func() { c.finish(tc.err) }) {
					select {
					case <-ch:
					case <-time.After(10 * time.Second):
						t.Fatal("a channel handed out is still open after the commit completed")
					}
				}
				if c.werr != tc.err || c.err != tc.err {
					t.Fatalf("outcome werr=%v err=%v, want %v", c.werr, c.err, tc.err)
				}
			}
		})
	}
}

func askAll(c *Commit, bits []uint32) []<-chan struct{} {
	var chans []<-chan struct{}
	for _, bit := range bits {
		chans = append(chans, c.channel(bit))
	}
	return chans
}

// TestCommitOutlivesItsGroup: groups are reused once written, their
// Commits never: a Commit held after its group was written (and the group
// reused for later records) still reports its own outcome, and is not the
// Commit of any later group.
func TestCommitOutlivesItsGroup(t *testing.T) {
	l, err := open(t.TempDir(), &Options{Sync: SyncNever}, faults{})
	if err != nil {
		t.Fatal(err)
	}
	defer closeOrFail(t, l)
	seen := map[*Commit]bool{}
	var held []*Commit
	for i := range 100 {
		_, c, err := l.AppendWaiting([]byte("r"), false)
		if err != nil {
			t.Fatal(err)
		}
		if seen[c] {
			t.Fatalf("record %d got the Commit of an earlier group", i)
		}
		seen[c] = true
		if err := c.Wait(); err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	l.mu.Lock()
	reused := len(l.mu.free) > 0
	l.mu.Unlock()
	if !reused {
		t.Fatal("no written group was kept for reuse")
	}
	for i, c := range held {
		select {
		case <-c.Done():
		default:
			t.Fatalf("the Commit of record %d is no longer done", i)
		}
		if err := c.Wait(); err != nil {
			t.Fatalf("the Commit of record %d: %v", i, err)
		}
	}
}

// TestGroupReuseUnderConcurrency: callers that append at once, some
// waiting on Done() and some in Wait, while written groups are reused for
// later records: every Commit is its own and ends done, and every record
// reads back as it was appended, so no reused buffer was written over
// before the committer wrote it. Run under -race, it also checks that
// nothing touches a group once it is handed back.
func TestGroupReuseUnderConcurrency(t *testing.T) {
	for name, mode := range map[string]SyncMode{"never": SyncNever, "always": SyncAlways} {
		t.Run(name, func(t *testing.T) {
			l, err := open(t.TempDir(), &Options{Sync: mode, SegmentSize: 64 << 10}, faults{})
			if err != nil {
				t.Fatal(err)
			}
			defer closeOrFail(t, l)
			const callers, each = 8, 200
			var mu sync.Mutex
			want := map[LSN]string{}
			seen := map[*Commit]bool{}
			var wg sync.WaitGroup
			for g := range callers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range each {
						rec := fmt.Sprintf("caller %d record %d", g, i)
						lsn, c, err := l.AppendWaiting([]byte(rec), i%3 == 0)
						if err == nil && i%2 == 0 {
							<-c.Done()
						}
						if err == nil {
							err = c.Wait()
						}
						if err != nil {
							t.Error(err)
							return
						}
						mu.Lock()
						want[lsn] = rec
						seen[c] = true
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			for lsn, rec := range want {
				got, err := l.Read(lsn)
				if err != nil || string(got) != rec {
					t.Fatalf("Read(%d) = %q, %v; want %q", lsn, got, err, rec)
				}
			}
			if len(want) != callers*each {
				t.Fatalf("%d records kept, want %d", len(want), callers*each)
			}
			for c := range seen {
				if err := c.Wait(); err != nil {
					t.Fatalf("a Commit held after its group was reused: %v", err)
				}
			}
		})
	}
}

// TestCompleted: Completed reports Wait's outcome known, not the write:
// a group that waits for an fsync (SyncAlways) is not completed once
// written, only once done, with a failure as with success; a group that
// waits for its write only is completed once written. The look makes no
// channel, and once it says completed, Wait returns the outcome and
// Done's channel is closed.
func TestCompleted(t *testing.T) {
	errFail := errors.New("failed")
	for _, tc := range []struct {
		name    string
		durable bool
		err     error
	}{
		{"fsynced", true, nil},
		{"fsynced/failed", true, errFail},
		{"written", false, nil},
		{"written/failed", false, errFail},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &Commit{durable: tc.durable}
			if c.Completed() {
				t.Fatal("completed before its write")
			}
			c.markWritten(tc.err)
			if got := c.Completed(); got != !tc.durable {
				t.Fatalf("written: Completed %v, want %v", got, !tc.durable)
			}
			c.finish(tc.err)
			if !c.Completed() {
				t.Fatal("not completed once done")
			}
			if c.written.Load() != nil || c.done.Load() != nil {
				t.Fatal("Completed made a channel")
			}
			if err := c.Wait(); err != tc.err {
				t.Fatalf("Wait: %v, want %v", err, tc.err)
			}
			select {
			case <-c.Done():
			default:
				t.Fatal("Done's channel open on a completed commit")
			}
		})
	}
}
