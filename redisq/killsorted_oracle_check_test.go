package redisq_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// sortedOracleOf returns a sorted kill-loop oracle that has read the given
// journal, of a child run with maxDeliveries and an AckTimeout of a
// second, the sorted queue with SingleFlight and the windowed one
// without, no kill of the server.
func sortedOracleOf(t *testing.T, journal string, maxDeliveries int) (*sortedOracle, error) {
	return sortedOracleSingle(t, journal, maxDeliveries, map[string]bool{"s": true})
}

// sortedOracleSingle is sortedOracleOf with SingleFlight on the queues
// single names.
func sortedOracleSingle(t *testing.T, journal string, maxDeliveries int, single map[string]bool) (*sortedOracle, error) {
	return sortedOracleKilled(t, journal, maxDeliveries, single, nil)
}

// sortedOracleKilled is sortedOracleSingle with the server killed at the
// given times (unix ns).
func sortedOracleKilled(t *testing.T, journal string, maxDeliveries int, single map[string]bool, kills []int64) (*sortedOracle, error) {
	path := filepath.Join(t.TempDir(), "journal")
	require.NoError(t, os.WriteFile(path, []byte(journal), 0o644))
	o := newSortedOracle()
	return o, o.readJournals([]sortedJournal{{path: path, maxDeliveries: maxDeliveries, ackTimeout: time.Second}}, single, kills)
}

// TestSortedKillOracle holds the sorted kill loop's oracle to hand-written
// journals: each violation it must count is counted (and once), what the
// queues may do is not counted, and a journal it cannot read is an error
// rather than a check passed.
func TestSortedKillOracle(t *testing.T) {
	// Two values of key1 at sort key 5, one of key0 at 1, published in
	// this order by one publisher; a windowed value published at 1000.
	const published = "P? c1.k0.s0.n1 s key1 5 100\nP+ c1.k0.s0.n1 110\n" +
		"P? c1.k0.s0.n2 s key1 5 120\nP+ c1.k0.s0.n2 130\n" +
		"P? c1.k0.s0.n3 s key0 1 140\nP+ c1.k0.s0.n3 150\n" +
		"P? c1.k0.w0.n1 w key1 0 1000\nP+ c1.k0.w0.n1 1010\n"
	const pulled = "B s 200 210 0 | 7 key1 c1.k0.s0.n1:5:100:1 c1.k0.s0.n2:5:125:1\n"
	for _, tc := range []struct {
		name    string
		journal string
		maxDel  int
		count   func(sortedCounts) int
		want    int
	}{
		{"acked then pulled again", pulled + "S? s ack 7 220 0\nS+ s ack 7 230\nB s 240 250 0 | 8 key1 c1.k0.s0.n1:5:100:2\n", -1,
			func(c sortedCounts) int { return c.RedeliveredAfterAck }, 1},
		{"acked", pulled + "S? s ack 7 220 0\nS+ s ack 7 230\n", -1,
			func(c sortedCounts) int { return c.violations() }, 0},
		{"a value in a batch of another key", "B s 200 210 0 | 7 key2 c1.k0.s0.n1:5:100:1\n", -1,
			func(c sortedCounts) int { return c.WrongKey }, 1},
		{"a value in a batch of the other queue", "B w 200 210 0 | 7 key1 c1.k0.s0.n1:5:5:1\n", -1,
			func(c sortedCounts) int { return c.WrongKey }, 1},
		{"a sort key not the published one", "B s 200 210 0 | 7 key1 c1.k0.s0.n1:6:100:1\n", -1,
			func(c sortedCounts) int { return c.WrongSort }, 1},
		{"a windowed stamp outside its Publish", "B w 600001100 600001200 500000000 | 9 key1 c1.k0.w0.n1:1020:1020:1\n", -1,
			func(c sortedCounts) int { return c.WrongSort }, 1},
		{"equal sort keys out of publish order", "B s 200 210 0 | 7 key1 c1.k0.s0.n2:5:125:1 c1.k0.s0.n1:5:100:1\n", -1,
			func(c sortedCounts) int { return c.Order }, 1},
		{"equal sort keys out of the order of an unknown publish", "P? c1.k0.s0.n5 s key1 5 160\nP! c1.k0.s0.n5\n" +
			"P? c1.k0.s0.n6 s key1 5 170\nP+ c1.k0.s0.n6 180\nB s 200 210 0 | 7 key1 c1.k0.s0.n6:5:175:1 c1.k0.s0.n5:5:190:1\n", -1,
			func(c sortedCounts) int { return c.Order }, 0},
		{"keys out of order in a Pull", "B s 200 210 0 | 7 key1 c1.k0.s0.n1:5:100:1 | 8 key0 c1.k0.s0.n3:1:145:1\n", -1,
			func(c sortedCounts) int { return c.Order }, 1},
		{"keys out of order under MaxDeliveries", "B s 200 210 0 | 7 key1 c1.k0.s0.n1:5:100:1 | 8 key0 c1.k0.s0.n3:1:145:1\n", 2,
			func(c sortedCounts) int { return c.Order }, 1},
		{"keys in order under MaxDeliveries, checked", "B s 200 210 0 | 8 key0 c1.k0.s0.n3:1:145:1 | 7 key1 c1.k0.s0.n1:5:100:1\n", 2,
			func(c sortedCounts) int { return c.OrderChecks }, 1},
		{"a single-flight key pulled while leased", "B s 200 210 0 | 7 key1 c1.k0.s0.n1:5:100:1\n" +
			"B s 220 230 0 | 8 key1 c1.k0.s0.n2:5:125:1\nS? s ack 7 240 0\nS+ s ack 7 250\n", -1,
			func(c sortedCounts) int { return c.Overlap }, 1},
		{"a single-flight key pulled after its lease was lost", "B s 200 210 0 | 7 key1 c1.k0.s0.n1:5:100:1\n" +
			"B s 220 1000000230 0 | 8 key1 c1.k0.s0.n2:5:125:1\nS? s ack 7 1000000240 0\nSL s ack 7 1000000250\n", -1,
			func(c sortedCounts) int { return c.violations() }, 0},
		{"a windowed value pulled twice at once", "B w 600001100 600001200 500000000 | 9 key1 c1.k0.w0.n1:1005:1005:1\n" +
			"B w 600001300 600001400 500000000 | 10 key1 c1.k0.w0.n1:1005:1005:2\nS? w ack 9 600001500 0\nS+ w ack 9 600001600\n", -1,
			func(c sortedCounts) int { return c.Overlap }, 1},
		{"a windowed batch before its window closed", "B w 1100 1200 500000000 | 9 key1 c1.k0.w0.n1:1005:1005:1\n", -1,
			func(c sortedCounts) int { return c.Early }, 1},
		{"a windowed batch once its window closed", "B w 500001100 500001200 500000000 | 9 key1 c1.k0.w0.n1:1005:1005:1\n", -1,
			func(c sortedCounts) int { return c.violations() }, 0},
		{"a key pulled before its nack's delay", pulled + "S? s nack 7 220 100000000\nS+ s nack 7 230\n" +
			"B s 240 250 0 | 8 key1 c1.k0.s0.n1:5:100:2 c1.k0.s0.n2:5:125:2\n", -1,
			func(c sortedCounts) int { return c.Early }, 1},
		{"a key pulled early when its nacked values went dead", pulled + "S? s nack 7 220 100000000\nS+ s nack 7 230\n" +
			"P? c1.k0.s0.n4 s key1 9 231\nP+ c1.k0.s0.n4 232\nB s 240 250 0 | 8 key1 c1.k0.s0.n4:9:231:1\n", 1,
			func(c sortedCounts) int { return c.violations() }, 0},
		{"delivery count not rising", pulled + "B s 240 250 0 | 8 key1 c1.k0.s0.n1:5:100:1\n", -1,
			func(c sortedCounts) int { return c.CountDown }, 1},
		{"pulled, never published", "B s 200 210 0 | 7 key1 c1.k0.s0.n9:5:100:1\n", -1,
			func(c sortedCounts) int { return c.Unexpected }, 1},
		{"a payload not one published", "X payload of s key key1 lease 7 is not one published: \"junk\"\n", -1,
			func(c sortedCounts) int { return c.Payload }, 1},
		{"a windowed sort key not its PublishedAt", "B w 600001100 600001200 500000000 | 9 key1 c1.k0.w0.n1:1005:1006:1\n", -1,
			func(c sortedCounts) int { return c.WrongSort }, 1},
		{"a later delivery of a value whose ack returned", "B s 200 210 0 | 7 key1 c1.k0.s0.n1:5:100:1\n" +
			"B s 205 215 0 | 8 key1 c1.k0.s0.n1:5:100:2\nS? s ack 7 220 0\nS+ s ack 7 230\n", -1,
			func(c sortedCounts) int { return c.RedeliveredAfterAck }, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := sortedOracleOf(t, published+tc.journal, tc.maxDel)
			require.NoError(t, err)
			require.Equal(t, tc.want, tc.count(o.counts), "%s\n%v", o.counts, o.bad)
		})
	}
	// Pairs of batches of a single-flight key: judged (OverlapChecks)
	// when the second pull began after the first returned and before its
	// lease was shown to end, a violation when it also returned before.
	for _, tc := range []struct {
		name             string
		journal          string
		judged, overlaps int
	}{
		{"pulled after the settle was sent", "B s 200 210 0 | 7 key1 c1.k0.s0.n1:5:100:1\n" +
			"S? s ack 7 220 0\nS+ s ack 7 250\nB s 230 240 0 | 8 key1 c1.k0.s0.n2:5:125:1\n", 0, 0},
		{"pulled while held, returned once the settle ran", "B s 200 210 0 | 7 key1 c1.k0.s0.n1:5:100:1\n" +
			"B s 215 260 0 | 8 key1 c1.k0.s0.n2:5:125:1\nS? s ack 7 240 0\nS+ s ack 7 250\n", 1, 0},
		{"a pull under way as the lease was taken", "B s 200 210 0 | 7 key1 c1.k0.s0.n1:5:100:1\n" +
			"B s 205 260 0 | 8 key1 c1.k0.s0.n2:5:125:1\nS? s ack 7 240 0\nS+ s ack 7 250\n", 0, 0},
		{"pulled during an extended lease", "B s 200 210 0 | 7 key1 c1.k0.s0.n1:5:100:1\n" +
			"E? s 7 220 100000000\nE+ s 7 230\nB s 240 50000250 0 | 8 key1 c1.k0.s0.n2:5:125:1\n", 1, 1},
		{"pulled once an extended lease ran out", "B s 200 210 0 | 7 key1 c1.k0.s0.n1:5:100:1\n" +
			"E? s 7 220 100000000\nE+ s 7 230\nB s 240 100000250 0 | 8 key1 c1.k0.s0.n2:5:125:1\n", 1, 0},
		{"pulled within the margin before an extended lease runs out", "B s 200 210 0 | 7 key1 c1.k0.s0.n1:5:100:1\n" +
			"E? s 7 220 100000000\nE+ s 7 230\nB s 90000220 90000300 0 | 8 key1 c1.k0.s0.n2:5:125:1\n", 0, 0},
		{"pulled during an extended lease, after a settle was sent", "B s 200 210 0 | 7 key1 c1.k0.s0.n1:5:100:1\n" +
			"E? s 7 220 100000000\nE+ s 7 230\nS? s ack 7 235 0\nS! s ack 7\nB s 240 50000250 0 | 8 key1 c1.k0.s0.n2:5:125:1\n", 0, 0},
		{"pulled during an extend of unknown outcome", "B s 200 210 0 | 7 key1 c1.k0.s0.n1:5:100:1\n" +
			"E? s 7 220 100000000\nE! s 7\nB s 240 50000250 0 | 8 key1 c1.k0.s0.n2:5:125:1\n", 0, 0},
		{"pulled during an extend that found the lease lost", "B s 200 210 0 | 7 key1 c1.k0.s0.n1:5:100:1\n" +
			"E? s 7 220 100000000\nEL s 7 1000000300\nB s 240 50000250 0 | 8 key1 c1.k0.s0.n2:5:125:1\n", 0, 0},
		{"pulled after a second extend, within the first one's lease", "B s 200 210 0 | 7 key1 c1.k0.s0.n1:5:100:1\n" +
			"E? s 7 220 100000000\nE+ s 7 230\nE? s 7 90000000 100000000\nE+ s 7 90000100\n" +
			"B s 95000000 150000000 0 | 8 key1 c1.k0.s0.n2:5:125:1\n", 1, 1},
		{"pulled after a second extend of unknown outcome, within the first one's lease", "B s 200 210 0 | 7 key1 c1.k0.s0.n1:5:100:1\n" +
			"E? s 7 220 100000000\nE+ s 7 230\nE? s 7 30000000 10000000\nE! s 7\n" +
			"B s 35000000 50000000 0 | 8 key1 c1.k0.s0.n2:5:125:1\n", 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := sortedOracleOf(t, published+tc.journal, -1)
			require.NoError(t, err)
			require.Equal(t, tc.judged, o.counts.OverlapChecks, "judged\n%s\n%v", o.counts, o.bad)
			require.Equal(t, tc.overlaps, o.counts.Overlap, "overlaps\n%s\n%v", o.counts, o.bad)
			require.Equal(t, tc.overlaps, o.counts.violations(), o.bad)
		})
	}
	// Settles that returned ErrLeaseLost (AckTimeout 1s): before the
	// lease's deadline a violation, where the oracle can judge it.
	for _, tc := range []struct {
		name                   string
		journal                string
		kills                  []int64
		judged, unjudged, flag int
	}{
		{"acked within an extended lease", "E? s 7 220 100000000\nE+ s 7 230\nS? s ack 7 50000000 0\nS+ s ack 7 50000100\n",
			nil, 1, 0, 0},
		{"acked past an extended lease's deadline", "E? s 7 220 100000000\nE+ s 7 230\nS? s ack 7 100000300 0\nS+ s ack 7 100000400\n",
			nil, 0, 0, 0},
		{"lost before an extended lease's deadline", "E? s 7 220 100000000\nE+ s 7 230\nS? s ack 7 50000000 0\nSL s ack 7 50000100\n",
			nil, 1, 0, 1},
		{"lost once an extended lease ran out", "E? s 7 220 100000000\nE+ s 7 230\nS? s ack 7 100000300 0\nSL s ack 7 100000400\n",
			nil, 0, 1, 0},
		{"lost within the margin of an extended lease's deadline", "E? s 7 220 100000000\nE+ s 7 230\nS? s nack 7 90000000 0\nSL s nack 7 90000300\n",
			nil, 0, 1, 0},
		{"lost before the pull's deadline", "S? s dead 7 500000000 0\nSL s dead 7 500000100\n", nil, 1, 0, 1},
		{"lost once the pull's lease ran out", "S? s ack 7 1000000300 0\nSL s ack 7 1000000400\n", nil, 0, 1, 0},
		{"lost after an extend of unknown outcome", "E? s 7 220 100000000\nE! s 7\nS? s ack 7 50000000 0\nSL s ack 7 50000100\n",
			nil, 0, 1, 0},
		{"lost after an extend found the lease lost", "E? s 7 1000000220 100000000\nEL s 7 1000000230\nS? s ack 7 1000000240 0\nSL s ack 7 1000000250\n",
			nil, 0, 1, 0},
		{"lost with a kill of the server after the extend", "E? s 7 220 100000000\nE+ s 7 230\nS? s ack 7 50000000 0\nSL s ack 7 50000100\n",
			[]int64{40000000}, 0, 1, 0},
		{"lost with a kill of the server before the extend", "E? s 7 220 100000000\nE+ s 7 230\nS? s ack 7 50000000 0\nSL s ack 7 50000100\n",
			[]int64{215}, 1, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := sortedOracleKilled(t, published+pulled+tc.journal, -1, map[string]bool{"s": true}, tc.kills)
			require.NoError(t, err)
			require.Equal(t, tc.judged, o.counts.LostJudged, "judged\n%s\n%v", o.counts, o.bad)
			require.Equal(t, tc.unjudged, o.counts.LostUnjudged, "unjudged\n%s\n%v", o.counts, o.bad)
			require.Equal(t, tc.flag, o.counts.LostEarly, "%s\n%v", o.counts, o.bad)
			require.Equal(t, tc.flag, o.counts.violations(), o.bad)
		})
	}
	// Extends that returned ErrLeaseLost (AckTimeout 1s): before the
	// lease's deadline as it stood (the pull's, or an earlier Extend's
	// that returned nil) a violation, where the oracle can judge it.
	for _, tc := range []struct {
		name                          string
		journal                       string
		kills                         []int64
		judged, again, unjudged, flag int
	}{
		{"extended within the pull's lease", "E? s 7 500000000 100000000\nE+ s 7 500000100\n", nil, 1, 0, 0, 0},
		{"lost within the pull's lease", "E? s 7 500000000 100000000\nEL s 7 500000100\n", nil, 1, 0, 0, 1},
		{"lost within the pull's lease, then a settle lost", "E? s 7 500000000 100000000\nEL s 7 500000100\n" +
			"S? s ack 7 500000200 0\nSL s ack 7 500000300\n", nil, 1, 0, 0, 1},
		{"lost once the pull's lease ran out", "E? s 7 1000000300 100000000\nEL s 7 1000000400\n", nil, 0, 0, 1, 0},
		{"lost within the margin of the pull's deadline", "E? s 7 990000000 100000000\nEL s 7 990000300\n", nil, 0, 0, 1, 0},
		{"lost within an extended lease", "E? s 7 900000000 500000000\nE+ s 7 900000100\n" +
			"E? s 7 1300000000 500000000\nEL s 7 1300000100\n", nil, 2, 1, 0, 1},
		{"lost once an extended lease ran out", "E? s 7 900000000 100000000\nE+ s 7 900000100\n" +
			"E? s 7 1000000100 500000000\nEL s 7 1000000200\n", nil, 1, 0, 1, 0},
		{"lost after an extend of unknown outcome", "E? s 7 220 100000000\nE! s 7\n" +
			"E? s 7 50000000 100000000\nEL s 7 50000100\n", nil, 0, 0, 1, 0},
		{"lost with a kill of the server since the pull", "E? s 7 500000000 100000000\nEL s 7 500000100\n",
			[]int64{300000000}, 0, 0, 1, 0},
		{"lost with a kill of the server before the pull", "E? s 7 500000000 100000000\nEL s 7 500000100\n",
			[]int64{150}, 1, 0, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := sortedOracleKilled(t, published+pulled+tc.journal, -1, map[string]bool{"s": true}, tc.kills)
			require.NoError(t, err)
			require.Equal(t, tc.judged, o.counts.ExtJudged, "judged\n%s\n%v", o.counts, o.bad)
			require.Equal(t, tc.again, o.counts.ExtAgain, "after an extend\n%s\n%v", o.counts, o.bad)
			require.Equal(t, tc.unjudged, o.counts.ExtUnjudged, "unjudged\n%s\n%v", o.counts, o.bad)
			require.Equal(t, tc.flag, o.counts.ExtLostEarly, "%s\n%v", o.counts, o.bad)
			require.Equal(t, tc.flag, o.counts.violations()-o.counts.LostEarly, o.bad)
		})
	}
	t.Run("a single-flight windowed key pulled while leased", func(t *testing.T) {
		const j = "P? c1.k0.w0.n2 w key1 0 1020\nP+ c1.k0.w0.n2 1030\n" +
			"B w 600001100 600001200 500000000 | 9 key1 c1.k0.w0.n1:1005:1005:1\n" +
			"B w 600001300 600001400 500000000 | 10 key1 c1.k0.w0.n2:1025:1025:1\nS? w ack 9 600001500 0\nS+ w ack 9 600001600\n"
		o, err := sortedOracleSingle(t, published+j, -1, map[string]bool{"w": true})
		require.NoError(t, err)
		require.Equal(t, 1, o.counts.Overlap, "%s\n%v", o.counts, o.bad)
		o, err = sortedOracleSingle(t, published+j, -1, map[string]bool{"s": true})
		require.NoError(t, err)
		require.Zero(t, o.counts.Overlap+o.counts.OverlapChecks, "without SingleFlight, batches of other values: %s\n%v", o.counts, o.bad)
	})
	t.Run("published, not acked, not held", func(t *testing.T) {
		o, err := sortedOracleOf(t, published+pulled+"S? s ack 7 220 0\nS+ s ack 7 230\n", -1)
		require.NoError(t, err)
		o.checkpoint(map[string]bool{"c1.k0.s0.n3": true})
		require.Equal(t, 1, o.counts.Lost, o.bad) // the windowed value
		require.Equal(t, 1, o.counts.violations(), o.bad)
	})
	t.Run("acked, then dead", func(t *testing.T) {
		o, err := sortedOracleOf(t, published+pulled+"S? s ack 7 220 0\nS+ s ack 7 230\n", -1)
		require.NoError(t, err)
		o.held("s", killPayload("c1.k0.s0.n1"), "key1", "dead")
		require.Equal(t, 1, o.counts.RedeliveredAfterAck, o.bad)
	})
	t.Run("dead after a checkpoint drained it", func(t *testing.T) {
		o, err := sortedOracleOf(t, published, -1)
		require.NoError(t, err)
		o.checkpoint(map[string]bool{"c1.k0.s0.n1": true, "c1.k0.s0.n2": true, "c1.k0.s0.n3": true, "c1.k0.w0.n1": true})
		require.Zero(t, o.counts.violations(), o.bad)
		o.held("s", killPayload("c1.k0.s0.n3"), "key0", "dead")
		require.Equal(t, 1, o.counts.Unexpected, o.bad)
		require.Equal(t, 1, o.counts.violations(), o.bad)
	})
	t.Run("a journal it cannot read", func(t *testing.T) {
		_, err := sortedOracleOf(t, published+"S? s ack 7 220 0\n", -1)
		require.Error(t, err, "a settle of a batch never pulled")
		_, err = sortedOracleOf(t, published+"B s 200 2x0 0 | 7 key1 c1.k0.s0.n1:5:100:1\n", -1)
		require.Error(t, err)
		_, err = sortedOracleOf(t, published+"B s 200 210 0 | 7 key1 c1.k0.s0.n1:5:100\n", -1)
		require.Error(t, err)
		_, err = sortedOracleOf(t, published+pulled+"S+ s ack 7 230\n", -1)
		require.Error(t, err, "a settle returned that was never sent")
		_, err = sortedOracleOf(t, published+pulled+"E+ s 7 230\n", -1)
		require.Error(t, err, "an extend returned that was never sent")
		_, err = sortedOracleOf(t, published+"E? s 7 220 100\n", -1)
		require.Error(t, err, "an extend of a batch never pulled")
		_, err = sortedOracleOf(t, published+pulled+"E? s 7 220 100\nEL s 7\n", -1)
		require.Error(t, err, "an extend refused with no time")
		_, err = sortedOracleOf(t, published+pulled+"E? s 7 220 100\nE+ s 7 230\nE+ s 7 240\n", -1)
		require.Error(t, err, "an extend returned twice")
	})
}
