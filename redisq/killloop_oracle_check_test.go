package redisq_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// oracleOf returns a kill-loop oracle that has read the given journal.
func oracleOf(t *testing.T, journal string) (*killOracle, error) {
	path := filepath.Join(t.TempDir(), "journal")
	require.NoError(t, os.WriteFile(path, []byte(journal), 0o644))
	o := newKillOracle()
	return o, o.readJournals([]string{path})
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
	t.Run("a number that is not one", func(t *testing.T) {
		_, err := oracleOf(t, sent+"A? c1.k0.n1.a0 1 1\nA+ c1.k0.n1.a0 1 1 12x0\n")
		require.Error(t, err, "an ack time that does not parse must not read as no ack")
		_, err = oracleOf(t, "E? c1.k0.n1.a0\nD c1.k0.n1.a0 c1.k0.n1 1 one 100 110\n")
		require.Error(t, err)
	})
}
