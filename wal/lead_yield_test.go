package wal

import "testing"

// leadWrites runs n writes of a leader without followers and returns
// how many of them yielded first.
func leadWrites(d *lead, n int) int {
	yields := 0
	for range n {
		turn, yield := d.take(true)
		if turn != nil {
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
	turn, yield := d.take(true)
	if turn != nil {
		t.Fatal("the leader found a leader")
	}
	if follow, _ := d.take(true); follow == nil {
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
