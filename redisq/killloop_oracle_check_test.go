package redisq_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// oracleOf returns a kill-loop oracle that has read the given journal,
// of a cycle with an AckTimeout of a second.
func oracleOf(t *testing.T, journal string) (*killOracle, error) {
	return oracleKilled(t, journal, nil)
}

// oracleKilled is oracleOf with the server killed at the given times
// (unix ns).
func oracleKilled(t *testing.T, journal string, kills []int64) (*killOracle, error) {
	path := filepath.Join(t.TempDir(), "journal")
	require.NoError(t, os.WriteFile(path, []byte(journal), 0o644))
	o := newKillOracle()
	return o, o.readJournals([]string{path}, time.Second, kills)
}

// TestKillOracle holds the kill loop's oracle to hand-written journals:
// each violation it must count is counted, and a journal it cannot read
// is an error rather than a check passed.
func TestKillOracle(t *testing.T) {
	const sent = "E? c1.k0.n1.a0\nE+ c1.k0.n1.a0 c1.k0.n1\nD c1.k0.n1.a0 c1.k0.n1 1 1 100 110\n"
	t.Run("acked then delivered again", func(t *testing.T) {
		o, err := oracleOf(t, sent+"A? c1.k0.n1.a0 1 1 115\nA+ c1.k0.n1.a0 1 1 120\nD c1.k0.n1.a0 c1.k0.n1 2 2 130 140\n")
		require.NoError(t, err)
		require.Equal(t, 1, o.counts.RedeliveredAfterAck, o.bad)
	})
	t.Run("acked then drained", func(t *testing.T) {
		o, err := oracleOf(t, sent+"A? c1.k0.n1.a0 1 1 115\nA+ c1.k0.n1.a0 1 1 120\n")
		require.NoError(t, err)
		o.held(killPayload("c1.k0.n1.a0"), "c1.k0.n1", "drained")
		require.Equal(t, 1, o.counts.RedeliveredAfterAck, o.bad)
	})
	t.Run("enqueued, not acked, not held", func(t *testing.T) {
		o, err := oracleOf(t, sent)
		require.NoError(t, err)
		o.checkpoint(map[string]bool{})
		require.Equal(t, 1, o.counts.Lost, o.bad)
	})
	t.Run("enqueued and held", func(t *testing.T) {
		o, err := oracleOf(t, sent)
		require.NoError(t, err)
		o.checkpoint(map[string]bool{"c1.k0.n1.a0": true})
		require.Zero(t, o.counts.violations(), o.bad)
	})
	t.Run("delivered, never sent", func(t *testing.T) {
		o, err := oracleOf(t, "D c1.k0.n2.a0 c1.k0.n2 1 1 100 110\n")
		require.NoError(t, err)
		require.Equal(t, 1, o.counts.Unexpected, o.bad)
	})
	t.Run("delivery count not rising", func(t *testing.T) {
		o, err := oracleOf(t, sent+"D c1.k0.n1.a0 c1.k0.n1 2 1 120 130\n")
		require.NoError(t, err)
		require.Equal(t, 1, o.counts.CountDown, o.bad)
	})
	// Extends of a delivery (AckTimeout 1s, dequeued from 100 to 110):
	// ErrLeaseLost before the lease's deadline a violation, where the
	// oracle can judge it; a delivery while an extended lease is held a
	// violation.
	for _, tc := range []struct {
		name                             string
		journal                          string
		kills                            []int64
		judged, unjudged, flag, overlaps int
	}{
		{"extended within the lease", "L? c1.k0.n1.a0 1 1 500000000 1000000000\nL+ c1.k0.n1.a0 1 1 500000100\n", nil, 1, 0, 0, 0},
		{"lost within the lease", "L? c1.k0.n1.a0 1 1 500000000 1000000000\nLL c1.k0.n1.a0 1 1 500000100\n", nil, 1, 0, 1, 0},
		{"lost within the margin of the deadline", "L? c1.k0.n1.a0 1 1 990000000 1000000000\nLL c1.k0.n1.a0 1 1 990000200\n", nil, 0, 1, 0, 0},
		{"lost once the lease ran out", "L? c1.k0.n1.a0 1 1 1000000200 1000000000\nLL c1.k0.n1.a0 1 1 1000000300\n", nil, 0, 1, 0, 0},
		{"lost with a kill of the server since the dequeue", "L? c1.k0.n1.a0 1 1 500000000 1000000000\nLL c1.k0.n1.a0 1 1 500000100\n",
			[]int64{300000000}, 0, 1, 0, 0},
		{"lost with a kill of the server before the dequeue", "L? c1.k0.n1.a0 1 1 500000000 1000000000\nLL c1.k0.n1.a0 1 1 500000100\n",
			[]int64{50}, 1, 0, 1, 0},
		{"delivered again within the extended lease", "L? c1.k0.n1.a0 1 1 500000000 1000000000\nL+ c1.k0.n1.a0 1 1 500000100\n" +
			"D c1.k0.n1.a0 c1.k0.n1 1 2 1200000000 1200000100\n", nil, 1, 0, 0, 1},
		{"delivered again once the extended lease ran out", "L? c1.k0.n1.a0 1 1 500000000 1000000000\nL+ c1.k0.n1.a0 1 1 500000100\n" +
			"D c1.k0.n1.a0 c1.k0.n1 1 2 1500000100 1500000200\n", nil, 1, 0, 0, 0},
		{"delivered again once a refused extend found the lease lost", "L? c1.k0.n1.a0 1 1 1000000200 1000000000\nLL c1.k0.n1.a0 1 1 1000000300\n" +
			"D c1.k0.n1.a0 c1.k0.n1 1 2 1000000400 1000000500\n", nil, 0, 1, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := oracleKilled(t, sent+tc.journal, tc.kills)
			require.NoError(t, err)
			require.Equal(t, tc.judged, o.counts.ExtJudged, "judged\n%s\n%v", o.counts, o.bad)
			require.Equal(t, tc.unjudged, o.counts.ExtUnjudged, "unjudged\n%s\n%v", o.counts, o.bad)
			require.Equal(t, tc.flag, o.counts.ExtLostEarly, "%s\n%v", o.counts, o.bad)
			require.Equal(t, tc.overlaps, o.counts.Overlap, "%s\n%v", o.counts, o.bad)
			require.Equal(t, tc.flag+tc.overlaps, o.counts.violations(), o.bad)
		})
	}
	// Acks of a delivery (AckTimeout 1s, dequeued from 100 to 110):
	// ErrLeaseLost before the lease's deadline a violation, where the
	// oracle can judge it.
	for _, tc := range []struct {
		name                   string
		journal                string
		kills                  []int64
		judged, unjudged, flag int
	}{
		{"acked within the lease", "A? c1.k0.n1.a0 1 1 500000000\nA+ c1.k0.n1.a0 1 1 500000100\n", nil, 1, 0, 0},
		{"lost within the lease", "A? c1.k0.n1.a0 1 1 500000000\nAL c1.k0.n1.a0 1 1 500000100\n", nil, 1, 0, 1},
		{"lost within the margin of the deadline", "A? c1.k0.n1.a0 1 1 990000000\nAL c1.k0.n1.a0 1 1 990000200\n", nil, 0, 1, 0},
		{"lost once the lease ran out", "A? c1.k0.n1.a0 1 1 1000000200\nAL c1.k0.n1.a0 1 1 1000000300\n", nil, 0, 1, 0},
		{"lost with a kill of the server since the dequeue", "A? c1.k0.n1.a0 1 1 500000000\nAL c1.k0.n1.a0 1 1 500000100\n",
			[]int64{300000000}, 0, 1, 0},
		{"lost with a kill of the server before the dequeue", "A? c1.k0.n1.a0 1 1 500000000\nAL c1.k0.n1.a0 1 1 500000100\n",
			[]int64{50}, 1, 0, 1},
		{"lost within an extended lease", "L? c1.k0.n1.a0 1 1 900000000 1000000000\nL+ c1.k0.n1.a0 1 1 900000100\n" +
			"A? c1.k0.n1.a0 1 1 1500000000\nAL c1.k0.n1.a0 1 1 1500000100\n", nil, 1, 0, 1},
		{"lost once an extended lease ran out", "L? c1.k0.n1.a0 1 1 900000000 100000000\nL+ c1.k0.n1.a0 1 1 900000100\n" +
			"A? c1.k0.n1.a0 1 1 1000000050\nAL c1.k0.n1.a0 1 1 1000000060\n", nil, 0, 1, 0},
		{"lost after an extend of unknown outcome", "L? c1.k0.n1.a0 1 1 400000000 1000000000\nL! c1.k0.n1.a0 1 1\n" +
			"A? c1.k0.n1.a0 1 1 500000000\nAL c1.k0.n1.a0 1 1 500000100\n", nil, 0, 1, 0},
		{"lost after a nack was sent", "S? c1.k0.n1.a0 1 1 400000000 nack\n" +
			"A? c1.k0.n1.a0 1 1 500000000\nAL c1.k0.n1.a0 1 1 500000100\n", nil, 0, 1, 0},
		{"ack of unknown outcome", "A? c1.k0.n1.a0 1 1 500000000\nA! c1.k0.n1.a0 1 1\n", nil, 0, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := oracleKilled(t, sent+tc.journal, tc.kills)
			require.NoError(t, err)
			require.Equal(t, tc.judged, o.counts.AckJudged, "judged\n%s\n%v", o.counts, o.bad)
			require.Equal(t, tc.unjudged, o.counts.AckUnjudged, "unjudged\n%s\n%v", o.counts, o.bad)
			require.Equal(t, tc.flag, o.counts.AckLostEarly, "%s\n%v", o.counts, o.bad)
			require.Equal(t, tc.flag, o.counts.violations()-o.counts.ExtLostEarly, o.bad)
		})
	}
	// A second delivery of the token (the first, AckTimeout 1s, dequeued
	// from 100 to 110): one that returned while the first's lease surely
	// held a violation, a kill of the server between or not.
	for _, tc := range []struct {
		name            string
		journal         string
		kills           []int64
		checks, overlap int
	}{
		{"delivered again within the lease", "D c1.k0.n1.a0 c1.k0.n1 2 2 500000000 500000100\n", nil, 1, 1},
		{"delivered again once the lease ran out", "D c1.k0.n1.a0 c1.k0.n1 2 2 1000000200 1000000300\n", nil, 1, 0},
		{"delivered again, returned within the margin of the deadline", "D c1.k0.n1.a0 c1.k0.n1 2 2 900000000 990000000\n", nil, 1, 0},
		{"delivered again after a nack was sent", "S? c1.k0.n1.a0 1 1 200000000 nack\nD c1.k0.n1.a0 c1.k0.n1 2 2 300000000 300000100\n", nil, 1, 0},
		{"delivered again before a dead-letter was sent", "S? c1.k0.n1.a0 1 1 600000000 dead\nD c1.k0.n1.a0 c1.k0.n1 2 2 300000000 300000100\n", nil, 1, 1},
		{"delivered again with a kill of the server between", "D c1.k0.n1.a0 c1.k0.n1 2 2 500000000 500000100\n", []int64{200000000}, 1, 1},
		{"delivered again with a kill of the server before both", "D c1.k0.n1.a0 c1.k0.n1 2 2 500000000 500000100\n", []int64{50}, 1, 1},
		{"a delivery begun before the other returned", "D c1.k0.n1.a0 c1.k0.n1 2 2 105 500000000\n", nil, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := oracleKilled(t, sent+tc.journal, tc.kills)
			require.NoError(t, err)
			require.Equal(t, tc.checks, o.counts.HeldChecks, "checks\n%s\n%v", o.counts, o.bad)
			require.Equal(t, tc.overlap, o.counts.LeaseOverlap, "%s\n%v", o.counts, o.bad)
			require.Equal(t, tc.overlap, o.counts.violations(), o.bad)
		})
	}
	t.Run("a lease held across cycles", func(t *testing.T) {
		o, err := oracleOf(t, sent)
		require.NoError(t, err)
		path := filepath.Join(t.TempDir(), "journal")
		require.NoError(t, os.WriteFile(path, []byte("D c1.k0.n1.a0 c1.k0.n1 2 2 500000000 500000100\n"), 0o644))
		require.NoError(t, o.readJournals([]string{path}, 10*time.Millisecond, nil))
		require.Equal(t, 1, o.counts.LeaseOverlap, "the first cycle's AckTimeout holds its delivery\n%s\n%v", o.counts, o.bad)
	})
	t.Run("a number that is not one", func(t *testing.T) {
		_, err := oracleOf(t, sent+"A? c1.k0.n1.a0 1 1 115\nA+ c1.k0.n1.a0 1 1 12x0\n")
		require.Error(t, err, "an ack time that does not parse must not read as no ack")
		_, err = oracleOf(t, "E? c1.k0.n1.a0\nD c1.k0.n1.a0 c1.k0.n1 1 one 100 110\n")
		require.Error(t, err)
		_, err = oracleOf(t, sent+"L+ c1.k0.n1.a0 1 1 120\n")
		require.Error(t, err, "an extend returned that was never sent")
		_, err = oracleOf(t, sent+"L? c1.k0.n1.a0 1 1 120 1000\nLL c1.k0.n1.a0 1 1\n")
		require.Error(t, err, "an extend refused with no time")
		_, err = oracleOf(t, sent+"A? c1.k0.n1.a0 1 1 120\nAL c1.k0.n1.a0 1 1\n")
		require.Error(t, err, "an ack refused with no time")
		_, err = oracleOf(t, sent+"AL c1.k0.n1.a0 1 1 130\n")
		require.Error(t, err, "an ack returned that was never sent")
		_, err = oracleOf(t, sent+"S? c1.k0.n1.a0 1 1 120 forget\n")
		require.Error(t, err, "a settle of no known kind")
	})
}
