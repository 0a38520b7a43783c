package cli

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/wal"
)

// TestRepairPrintsEachLostRangeOnce: a salvage's damaged regions can
// overlap (a torn write that a snapshot needed is both a cut entry and a
// log that ends too soon); repair prints each lost LSN once, and a range
// whose end is unknown in words.
func TestRepairPrintsEachLostRangeOnce(t *testing.T) {
	for _, tt := range []struct {
		name string
		log  wal.Report
		want []string
	}{
		{"same LSN twice", wal.Report{Salvaged: []wal.Damage{
			{Segment: "log/1", Offset: 2548, Bytes: 38, Entries: 1, FirstLSN: 40, LastLSN: 40, Reason: "torn write"},
			{Segment: "log/1", FirstLSN: 40, LastLSN: 40, Reason: "the log ends at LSN 39"}}},
			[]string{"lost LSNs: 40"}},
		{"overlapping", wal.Report{Salvaged: []wal.Damage{
			{Segment: "log/1", Offset: 2071, Bytes: 20, Entries: 1, FirstLSN: 33, LastLSN: 33},
			{Segment: "log/1", FirstLSN: 33, LastLSN: 40}}},
			[]string{"lost LSNs: 33-40"}},
		{"apart", wal.Report{Salvaged: []wal.Damage{
			{Segment: "log/1", Entries: 2, FirstLSN: 3, LastLSN: 4},
			{Segment: "log/2", Entries: 1, FirstLSN: 9, LastLSN: 9}}},
			[]string{"lost LSNs: 3-4", "lost LSNs: 9"}},
		{"torn tail, end unknown", wal.Report{Torn: &wal.Damage{Segment: "log/30", Offset: 1650, Bytes: 6, Entries: 1, FirstLSN: 42}},
			[]string{"lost LSNs: from 42 (the last one is unknown)"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			printLost(&b, queue.RepairReport{Repaired: true, Recovery: queue.Recovery{Log: tt.log}}, queue.KindAck)
			var got []string
			for _, l := range strings.Split(b.String(), "\n") {
				if strings.HasPrefix(l, "lost LSNs:") {
					got = append(got, l)
				}
			}
			require.Equal(t, tt.want, got, b.String())
		})
	}
}

// TestDamageCounts: one entry is "1 entry", in the CLI's lines and in the
// errors that name a damaged region.
func TestDamageCounts(t *testing.T) {
	d := wal.Damage{Segment: "log/1", Offset: 7, Bytes: 20, Entries: 1, FirstLSN: 5, LastLSN: 5, Reason: "bad checksum"}
	require.Equal(t, "segment log/1 offset 7: 20 bytes, 1 entry, LSN 5 (bad checksum)", describeDamage(d))
	require.Equal(t, "log/1 offset 7: 20 bytes, 1 entry, LSN 5: bad checksum", d.String())
	d.Entries, d.LastLSN = 2, 6
	require.Equal(t, "log/1 offset 7: 20 bytes, 2 entries, LSNs 5-6: bad checksum", d.String())
	d.LastLSN = 0
	require.Equal(t, "log/1 offset 7: 20 bytes, 2 entries, LSNs from 5 (the last one unknown): bad checksum", d.String())
	d.FirstLSN = 0
	require.Equal(t, "log/1 offset 7: 20 bytes, 2 entries, LSNs unknown: bad checksum", d.String())
}

// TestRepairCounts: the summary line of a repair says "1 record", "1
// lease" and "1 message" for one.
func TestRepairCounts(t *testing.T) {
	var b bytes.Buffer
	printLost(&b, queue.RepairReport{Repaired: true, Recovery: queue.Recovery{Replayed: 1, Requeued: 1, Skipped: 1, Rewritten: 1}}, queue.KindAck)
	require.Equal(t, "replayed 1 record after snapshot LSN 0; 1 lease ready again; 1 record no longer applied and was skipped\n"+
		"rewritten: 1 message copied past the damage (or dropped where its record was lost); damaged segments removed\n", b.String())
}

// TestRepairRewrittenNamesKind: the rewritten line of a repair counts a
// sorted or windowed queue's values as values, as its dropped lines name
// them, and an ack queue's messages as messages.
func TestRepairRewrittenNamesKind(t *testing.T) {
	for _, tt := range []struct {
		kind queue.Kind
		want string
	}{
		{queue.KindAck, "rewritten: 2 messages copied past the damage (or dropped where their record was lost); damaged segments removed\n"},
		{queue.KindSorted, "rewritten: 2 values copied past the damage (or dropped where their record was lost); damaged segments removed\n"},
		{queue.KindWindowed, "rewritten: 1 value copied past the damage (or dropped where its record was lost); damaged segments removed\n"},
		{0, "rewritten: 2 messages or values copied past the damage (or dropped where their record was lost); damaged segments removed\n"},
	} {
		t.Run(tt.kind.String(), func(t *testing.T) {
			n := 2
			if tt.kind == queue.KindWindowed {
				n = 1
			}
			var b bytes.Buffer
			printLost(&b, queue.RepairReport{Repaired: true, Recovery: queue.Recovery{Rewritten: n}}, tt.kind)
			require.Equal(t, "replayed 0 records after snapshot LSN 0\n"+tt.want, b.String())
		})
	}
}

// TestUsageLineOfCommandWithoutArguments: the usage line of a command that
// takes no argument ends at its name.
func TestUsageLineOfCommandWithoutArguments(t *testing.T) {
	var b bytes.Buffer
	versionCmd.printHelp(&b, nil)
	first, _, _ := strings.Cut(b.String(), "\n")
	require.Equal(t, "Usage: walq version", first)
}

// TestStatsAgeByTheQueueClock: the age of the oldest message is measured
// from Stats.At, when the queue read its figures by its own clock, not
// from the wall clock when the CLI formats them.
func TestStatsAgeByTheQueueClock(t *testing.T) {
	at := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	c := newCounts(queue.Stats{At: at, OldestEnqueuedAt: at.Add(-90 * time.Second)})
	require.Equal(t, 90.0, c.OldestAge)
}

// TestVerifyErrorOfOneRegion: Verify's error names one damaged region as
// one, with its entry and LSN in the singular.
func TestVerifyErrorOfOneRegion(t *testing.T) {
	dir := t.TempDir()
	q, err := queue.Open(dir, &queue.Options{SegmentSize: 4096})
	require.NoError(t, err)
	for range 100 {
		_, err := q.Enqueue(context.Background(), []byte(strings.Repeat("x", 100)))
		require.NoError(t, err)
	}
	require.NoError(t, q.Close())
	segs, err := segmentFiles(dir)
	require.NoError(t, err)
	require.Greater(t, len(segs), 2)
	b, err := os.ReadFile(segs[0])
	require.NoError(t, err)
	b[len(b)/2] ^= 0x10
	require.NoError(t, os.WriteFile(segs[0], b, 0o600))
	_, err = queue.Verify(dir, nil)
	require.ErrorIs(t, err, queue.ErrCorrupt)
	require.Contains(t, err.Error(), ": a damaged log region: ")
	require.Regexp(t, `, 1 entry, LSN \d+: `, err.Error())
}

// TestDamageLostNoLSN: a torn witness (an entry of no record) is cut and
// loses no LSN; its line must not name one.
func TestDamageLostNoLSN(t *testing.T) {
	d := wal.Damage{Segment: "log/1", Offset: 74, Bytes: 23, Entries: 1, FirstLSN: 4, LastLSN: 3, Reason: "torn write"}
	require.Equal(t, "segment log/1 offset 74: 23 bytes, 1 entry, no LSN (torn write)", describeDamage(d))
	require.Equal(t, "log/1 offset 74: 23 bytes, 1 entry, no LSN: torn write", d.String())
}

// TestDroppedLine: repair names a dropped ack message by its id, a sorted
// or windowed queue's value by its key, and says "id or key" when the
// queue's kind is unknown.
func TestDroppedLine(t *testing.T) {
	m := queue.Lost{Seq: 7, ID: "K"}
	for _, tt := range []struct {
		kind queue.Kind
		want string
	}{
		{queue.KindAck, `dropped message: seq 7 id "K"`},
		{queue.KindSorted, `dropped value: seq 7 key "K"`},
		{queue.KindWindowed, `dropped value: seq 7 key "K"`},
		{0, `dropped: seq 7 id or key "K"`},
	} {
		t.Run(tt.kind.String(), func(t *testing.T) { require.Equal(t, tt.want, droppedLine(tt.kind, m)) })
	}
}
