package wal

import (
	"testing"
	"time"
)

// TestLeadFollowerAllocatesNothing pins that a caller arriving during a
// write allocates nothing to follow it when the turn is over before it
// blocks, as it usually is without fsync: the channel a blocked follower
// waits on is made only by one that blocks.
func TestLeadFollowerAllocatesNothing(t *testing.T) {
	var d lead
	allocs := testing.AllocsPerRun(1000, func() {
		if follower, _, _ := d.take(true); follower {
			t.Fatal("a lone caller found a leader")
		}
		follower, turn, _ := d.take(true)
		if !follower {
			t.Fatal("a caller arriving during a write became a second leader")
		}
		d.release(false)
		if !d.ended(turn) {
			t.Fatal("the turn is not over after the leader released it")
		}
		d.wait(turn) // over: returns at once
	})
	if allocs != 0 {
		t.Errorf("a leader's turn with a follower allocated %v times, want 0", allocs)
	}
}

// TestLeadWaitEndsWithTurn pins that a follower blocked in wait returns
// when the leader releases its turn, and not before.
func TestLeadWaitEndsWithTurn(t *testing.T) {
	var d lead
	d.take(true)
	_, turn, _ := d.take(true)
	done := make(chan struct{})
	go func() {
		d.wait(turn)
		close(done)
	}()
	select {
	case <-done:
		t.Fatal("the follower's wait returned while the leader still wrote")
	case <-time.After(50 * time.Millisecond):
	}
	d.release(false)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the follower's wait did not return after the leader released its turn")
	}
	if follower, _, _ := d.take(true); follower {
		t.Fatal("a caller after the turn found a leader")
	}
}
