package queue

import (
	"bytes"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"
	"github.com/walq/walq/index"
)

// encode returns the snapshot body that encodeTo writes.
func (f *frozen) encode() ([]byte, error) {
	var buf bytes.Buffer
	err := f.encodeTo(&buf)
	return buf.Bytes(), err
}

// goldenState builds a state by applying fixed records: ack-queue messages
// in each state, and a sorted index with pending values, a leased batch, a
// dead value and a held key; then the records in more.
func goldenState(t *testing.T, more ...record) *state {
	st := newState(&Options{DedupWindow: 1, cacheBytes: 1 << 20})
	recs := []record{
		{Op: opEnqueue, ID: "a", At: 10, Payload: []byte("one")},
		{Op: opEnqueue, ID: "b", At: 11, Payload: []byte("two")},
		{Op: opPublish, Key: "k1", Sort: []byte{0, 5}, At: 20, Payload: []byte("v1")},
		{Op: opPublish, Key: "k1", Sort: []byte{0, 3}, At: 21, Payload: []byte("v2")},
		{Op: opPublish, Key: "k2", Sort: []byte{0, 4}, At: 22, Payload: []byte("v3")},
		{Op: opPull, Key: "k1", At: 30, Due: 90},
		{Op: opPublish, Key: "k3", Sort: []byte{0, 9}, At: 23, Payload: []byte("v4")},
		{Op: opPull, Key: "k3", At: 31, Due: 91},
		{Op: opBatchDead, Lease: 8, Reason: "poison"},
		{Op: opBatchReturn, Lease: 6, Due: 95, Reason: "nack"},
		{Op: opPull, Key: "k2", At: 32, Due: 92},
	}
	recs = append(recs, more...)
	for i := range recs {
		require.NoError(t, st.apply(uint64(i+1), &recs[i], 40+i), "record %d", i+1)
	}
	return st
}

// copyOfFirst is the record of a compaction that copies the never-delivered
// message at LSN 1 (of goldenState, 40 bytes) forward: its entry is
// Undelivered.
var copyOfFirst = record{Op: opMove, Seq: 1, Flags: flagCursor, ID: "a", At: 40, Enq: 10, Size: 40,
	Payload: []byte("one")}

// TestSnapshotBodyGolden pins the snapshot body's bytes, part of the file
// format (see frozen.encode), and checks that they decode to the same
// state. WALQ_WRITE_GOLDEN=1 rewrites testdata/state.golden.
func TestSnapshotBodyGolden(t *testing.T) {
	body, err := goldenState(t, copyOfFirst).freeze().encode()
	require.NoError(t, err)
	path := filepath.Join("testdata", "state.golden")
	if os.Getenv("WALQ_WRITE_GOLDEN") == "1" {
		require.NoError(t, os.WriteFile(path, body, 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err)
	require.True(t, bytes.Equal(want, body), "snapshot body changed:\n got %x\nwant %x", body, want)

	st, err := decodeState(want, &Options{DedupWindow: 1})
	require.NoError(t, err)
	again, err := st.freeze().encode()
	require.NoError(t, err)
	require.Equal(t, want, again, "decode then encode")
	c := st.sorted.Counts()
	require.Equal(t, 2, c.Pending)
	require.Equal(t, 1, c.Batches)
	require.Equal(t, 1, c.Leased)
	require.Equal(t, 1, c.Dead)
}

// TestSnapshotBodyV1 checks that a version 1 body (testdata/state-v1.golden,
// written before entries had Undelivered) still decodes, to the state of
// the records it was written from.
func TestSnapshotBodyV1(t *testing.T) {
	v1, err := os.ReadFile(filepath.Join("testdata", "state-v1.golden"))
	require.NoError(t, err)
	st, err := decodeState(v1, &Options{DedupWindow: 1})
	require.NoError(t, err)
	got, err := st.freeze().encode()
	require.NoError(t, err)
	want, err := goldenState(t).freeze().encode()
	require.NoError(t, err)
	require.Equal(t, want, got)
}

// The golden body holds the copied entry as Undelivered, and decoding it
// keeps the flag: the copy is delivered after the messages ready again.
func TestSnapshotKeepsUndelivered(t *testing.T) {
	body, err := goldenState(t, copyOfFirst).freeze().encode()
	require.NoError(t, err)
	st, err := decodeState(body, &Options{DedupWindow: 1})
	require.NoError(t, err)
	e, ok := st.table.Get(1)
	require.True(t, ok)
	require.True(t, e.Undelivered)
	require.Equal(t, index.Ready, e.State)
}

// TestAppendEntryMatchesMsgpack holds appendEntry to the bytes
// vmihailenco/msgpack's Encoder writes for the same index.Entry (the form
// snapshots had before appendEntry): every field at its extremes and at
// random, strings of every length class, both Undelivered values.
func TestAppendEntryMatchesMsgpack(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 3))
	str := func() string {
		n := []int{0, 1, 31, 32, 255, 256, 65535, 65536}[rng.IntN(8)]
		return strings.Repeat("é", n/2) + strings.Repeat("x", n%2)
	}
	i64 := func() int64 {
		return []int64{0, -1, 1, math.MinInt64, math.MaxInt64, rng.Int64(), -rng.Int64()}[rng.IntN(7)]
	}
	u64 := func() uint64 { return []uint64{0, 1, 127, 128, math.MaxUint64, rng.Uint64()}[rng.IntN(6)] }
	u32 := func() uint32 { return []uint32{0, 1, 255, 65536, math.MaxUint32, rng.Uint32()}[rng.IntN(6)] }
	n := 2000
	if raceEnabled { // one goroutine: the plain run checks all 2,000
		n = 500
	}
	for i := range n {
		e := index.Entry{Seq: u64(), Loc: u64(), ID: str(), Size: u32(), EnqueuedAt: i64(), Deliveries: u32(),
			State: index.State(rng.IntN(256)), Due: i64(), Lease: u64(), DeliveredAt: i64(), Reason: str(),
			Undelivered: rng.IntN(2) == 0}
		want, err := msgpack.Marshal(&e)
		require.NoError(t, err)
		require.Equal(t, want, appendEntry(nil, &e), "entry %d: %+v", i, e)
	}
}
