package wal

import (
	"testing"
	"time"
)

// leadWrites runs n writes of a leader without followers and returns
// how many of them yielded first.
func leadWrites(d *lead, n int) int {
	yields := 0
	for range n {
		_, leads, yield := d.take(true)
		if !leads {
			panic("a lone caller found a leader")
		}
		if yield {
			yields++
		}
		d.release(yield)
	}
	return yields
}

// leadWithFollower runs one write during which another caller arrives.
func leadWithFollower(t *testing.T, d *lead) {
	t.Helper()
	_, leads, yield := d.take(true)
	if !leads {
		t.Fatal("the leader found a leader")
	}
	if _, second, _ := d.take(true); second {
		t.Fatal("a caller arriving during a write became a second leader")
	}
	d.release(yield)
}

// TestLeadYields pins when a leader without fsync yields before its write:
// while yields bring followers, and then ever more rarely, so that a lone
// caller almost never pays for a yield; a follower brings the yields back.
func TestLeadYields(t *testing.T) {
	// A lone caller: maxMisses yields, then probes after 64, 128, …, 4096
	// writes, then every 4096 writes.
	probes := 0
	for n, p := 0, yieldProbe; n+p <= 20000-maxMisses; n, p = n+p, min(2*p, maxProbe) {
		probes++
	}
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, d *lead)
		n     int
		want  int
	}{
		{"lone caller", func(*testing.T, *lead) {}, 20000, maxMisses + probes},
		{"first writes", func(*testing.T, *lead) {}, maxMisses + yieldProbe - 1, maxMisses},
		{"follower after the yields stopped", func(t *testing.T, d *lead) {
			leadWrites(d, 20000)
			leadWithFollower(t, d)
		}, yieldProbe, 1},
		{"yield that brings a follower", func(t *testing.T, d *lead) {
			leadWrites(d, maxMisses-1)
			leadWithFollower(t, d) // the last yield of the first ones
		}, maxMisses, maxMisses},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var d lead
			tc.setup(t, &d)
			if got := leadWrites(&d, tc.n); got != tc.want {
				t.Errorf("%d writes yielded %d times, want %d", tc.n, got, tc.want)
			}
		})
	}
}

// TestLeadFollowerWaitsForTheTurn pins the hand-over between a leader and
// its followers: a follower's turn is over once the leader it joined has
// released the lead, not before; a follower blocked in wait is woken by
// that release; and one that joins the next leader waits for that one.
func TestLeadFollowerWaitsForTheTurn(t *testing.T) {
	var d lead
	_, leads, yield := d.take(true)
	if !leads {
		t.Fatal("a lone caller found a leader")
	}
	turn, leads, _ := d.take(true)
	if leads {
		t.Fatal("a caller arriving during a write became a second leader")
	}
	if d.over(turn) {
		t.Fatal("the turn is over before its leader released the lead")
	}
	woken := make(chan struct{})
	go func() {
		d.wait(turn)
		close(woken)
	}()
	select {
	case <-woken:
		t.Fatal("a follower's wait returned while its leader still leads")
	case <-time.After(20 * time.Millisecond):
	}
	d.release(yield)
	select {
	case <-woken:
	case <-time.After(time.Minute):
		t.Fatal("a blocked follower was not woken by its leader's release")
	}
	if !d.over(turn) {
		t.Fatal("the turn is not over after its leader released the lead")
	}

	// The next leader, and a follower of its turn.
	_, leads, yield = d.take(true)
	if !leads {
		t.Fatal("the lead was not free after the release")
	}
	next, leads, _ := d.take(true)
	if leads || d.over(next) {
		t.Fatal("a follower of the next leader is not waiting for it")
	}
	d.release(yield)
	if !d.over(next) {
		t.Fatal("the next turn is not over after its release")
	}
	d.wait(next) // returns at once
	if _, leads, _ := d.take(true); !leads {
		t.Fatal("the lead was not free after the second release")
	}
}
