package wal

import (
	"errors"
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
