package redisq_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// oracleOf returns a kill-loop oracle that has read the given journal.
func oracleOf(t *testing.T, journal string) (*killOracle, error) {
	path := filepath.Join(t.TempDir(), "journal")
	require.NoError(t, os.WriteFile(path, []byte(journal), 0o644))
	o := newKillOracle()
	return o, o.readJournals([]string{path}, time.Second, nil)
}

// TestKillOracle holds the kill loop's oracle to hand-written journals:
// each violation it must count is counted, and a journal it cannot read
// is an error rather than a check passed.
func TestKillOracle(t *testing.T) {
	const sent = "E? c1.k0.n1.a0\nE+ c1.k0.n1.a0 c1.k0.n1\nD c1.k0.n1.a0 c1.k0.n1 1 1 100 110\n"
	t.Run("acked then delivered again", func(t *testing.T) {
		o, err := oracleOf(t, sent+"A? c1.k0.n1.a0 1 1\nA+ c1.k0.n1.a0 1 1 120\nD c1.k0.n1.a0 c1.k0.n1 2 2 130 140\n")
		require.NoError(t, err)
		require.Equal(t, 1, o.counts.RedeliveredAfterAck, o.bad)
	})
	t.Run("acked then drained", func(t *testing.T) {
		o, err := oracleOf(t, sent+"A? c1.k0.n1.a0 1 1\nA+ c1.k0.n1.a0 1 1 120\n")
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
			path := filepath.Join(t.TempDir(), "journal")
			require.NoError(t, os.WriteFile(path, []byte(sent+tc.journal), 0o644))
			o := newKillOracle()
			require.NoError(t, o.readJournals([]string{path}, time.Second, tc.kills))
			require.Equal(t, tc.judged, o.counts.ExtJudged, "judged\n%s\n%v", o.counts, o.bad)
			require.Equal(t, tc.unjudged, o.counts.ExtUnjudged, "unjudged\n%s\n%v", o.counts, o.bad)
			require.Equal(t, tc.flag, o.counts.ExtLostEarly, "%s\n%v", o.counts, o.bad)
			require.Equal(t, tc.overlaps, o.counts.Overlap, "%s\n%v", o.counts, o.bad)
			require.Equal(t, tc.flag+tc.overlaps, o.counts.violations(), o.bad)
		})
	}
	t.Run("a number that is not one", func(t *testing.T) {
		_, err := oracleOf(t, sent+"A? c1.k0.n1.a0 1 1\nA+ c1.k0.n1.a0 1 1 12x0\n")
		require.Error(t, err, "an ack time that does not parse must not read as no ack")
		_, err = oracleOf(t, "E? c1.k0.n1.a0\nD c1.k0.n1.a0 c1.k0.n1 1 one 100 110\n")
		require.Error(t, err)
		_, err = oracleOf(t, sent+"L+ c1.k0.n1.a0 1 1 120\n")
		require.Error(t, err, "an extend returned that was never sent")
		_, err = oracleOf(t, sent+"L? c1.k0.n1.a0 1 1 120 1000\nLL c1.k0.n1.a0 1 1\n")
		require.Error(t, err, "an extend refused with no time")
	})
}
