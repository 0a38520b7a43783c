package queue

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/internal/fakeclock"
)

// invalidChanges are records that do not apply to the state that
// TestInvalidChangeIsRefused builds: message 1 leased, message 2 ready
// again, message 3 dead, a sorted batch leased, no dead value.
func invalidChanges(f *validateFixture) map[string]*record {
	return map[string]*record{
		"ack of an unknown message":        {Op: opAck, Seq: 999, Lease: 1},
		"ack naming an old lease":          {Op: opAck, Seq: f.leased, Lease: f.lease - 1},
		"nack of a ready message":          {Op: opNack, Seq: f.ready, Lease: 1},
		"extend of a dead message":         {Op: opExtend, Seq: f.dead, Due: 1},
		"expire naming another lease":      {Op: opExpire, Seq: f.leased, Lease: f.lease + 1},
		"dead-letter naming another lease": {Op: opDead, Seq: f.leased, Lease: f.lease + 1},
		"requeue of a message not dead":    {Op: opRequeueDead, Seq: f.ready},
		"purge of a leased message":        {Op: opPurge, Seq: f.leased},
		"lease of a leased message":        {Op: opLease, Seq: f.leased, Due: 1},
		"lease of a dead message":          {Op: opLease, Seq: f.dead, Due: 1},
		"move of an unknown message":       {Op: opMove, Seq: 999},
		"cursor move of an indexed one":    {Op: opMove, Seq: f.ready, Flags: flagCursor},
		"drop of an unknown message":       {Op: opDrop, Seq: 999},
		"pull of a key with nothing":       {Op: opPull, Key: "none", Due: 1},
		"ack of an unknown batch":          {Op: opBatchAck, Lease: 999},
		"return of an unknown batch":       {Op: opBatchReturn, Lease: 999},
		"extend of an unknown batch":       {Op: opBatchExtend, Lease: 999, Due: 1},
		"dead-letter of an unknown batch":  {Op: opBatchDead, Lease: 999},
		"revive of an unknown dead value":  {Op: opValueRevive, Seq: 999},
		"purge of an unknown dead value":   {Op: opValuePurge, Seq: 999},
		"move of an unknown sorted value":  {Op: opMove, Seq: 999, Flags: flagSorted, Key: "k"},
		"drop of an unknown sorted value":  {Op: opDrop, Seq: 999, Flags: flagSorted, Key: "k"},
		"an op past the last":              {Op: lastOp + 1, Seq: f.leased, Lease: f.lease},
		"op 255":                           {Op: 255, Seq: f.leased, Lease: f.lease},
	}
}

// validateFixture is a queue with a message in each state.
type validateFixture struct {
	dir           string
	q             *Queue
	leased, lease uint64 // a leased message and its lease
	ready, dead   uint64 // a message ready again, a dead one
	batch         uint64 // a leased sorted batch
	clock         *fakeclock.Clock
}

func newValidateFixture(t *testing.T) *validateFixture {
	t.Helper()
	f := &validateFixture{dir: t.TempDir(), clock: fakeclock.New()}
	q, err := Open(f.dir, &Options{Clock: f.clock, ManualRequeue: true, AckTimeout: time.Minute})
	require.NoError(t, err)
	f.q = q
	ctx := context.Background()
	for _, p := range []string{"leased", "ready", "dead"} {
		_, err := q.Enqueue(ctx, []byte(p))
		require.NoError(t, err)
	}
	m1, err := q.TryDequeue()
	require.NoError(t, err)
	m2, err := q.TryDequeue()
	require.NoError(t, err)
	m3, err := q.TryDequeue()
	require.NoError(t, err)
	require.NoError(t, m2.Nack(0))
	require.NoError(t, m3.DeadLetter("poison"))
	f.leased, f.lease, f.ready, f.dead = m1.Receipt.Seq, m1.Receipt.Lease, m2.Receipt.Seq, m3.Receipt.Seq
	require.NoError(t, q.publish(ctx, []byte{1}, "k", []byte("v"), q.now()))
	q.mu.Lock()
	bs, _, err := q.pullLocked(1, nil)
	q.mu.Unlock()
	require.NoError(t, err)
	require.Len(t, bs, 1)
	f.batch = bs[0].Lease
	return f
}

// frozenBytes is the encoded state: what a snapshot would hold.
func frozenBytes(t *testing.T, st *state) []byte {
	t.Helper()
	b, err := st.freeze().encode()
	require.NoError(t, err)
	return b
}

// TestInvalidChangeIsRefused plants records that do not apply: each is
// refused with ErrInvalidChange before anything is written, the state is
// unchanged, the queue goes on, and the directory opens again with the
// same state.
func TestInvalidChangeIsRefused(t *testing.T) {
	f := newValidateFixture(t)
	q := f.q
	for name, r := range invalidChanges(f) {
		t.Run(name, func(t *testing.T) {
			r.At = q.now()
			q.mu.Lock()
			before, last := frozenBytes(t, q.mu.st), q.log.LastLSN()
			_, err := q.appendLocked(r, nil)
			after, lastAfter := frozenBytes(t, q.mu.st), q.log.LastLSN()
			q.mu.Unlock()
			require.ErrorIs(t, err, ErrInvalidChange)
			require.Equal(t, last, lastAfter, "nothing appended")
			require.True(t, bytes.Equal(before, after), "state unchanged")
		})
	}

	// The queue goes on: the leased message is acked, the ready one
	// delivered, the dead one requeued.
	require.NoError(t, q.Ack(receiptOf(f.leased, f.lease)))
	m, err := q.TryDequeue()
	require.NoError(t, err)
	require.Equal(t, f.ready, m.Receipt.Seq)
	require.NoError(t, m.Ack())
	require.NoError(t, q.ackBatch(f.batch))
	_, err = q.Enqueue(context.Background(), []byte("after"))
	require.NoError(t, err)
	want := q.Stats()
	img := copyDir(t, f.dir) // as a crash leaves it: the log is replayed
	require.NoError(t, q.Close())

	for _, dir := range []string{f.dir, img} {
		q2, err := Open(dir, &Options{Clock: f.clock, ManualRequeue: true, AckTimeout: time.Minute})
		require.NoError(t, err, "the log replays")
		got := q2.Stats()
		require.Equal(t, want.Acked, got.Acked)
		require.Equal(t, want.Dead, got.Dead)
		require.Equal(t, want.BatchesAcked, got.BatchesAcked)
		m, err := q2.TryDequeue()
		require.NoError(t, err)
		require.Equal(t, "after", string(m.Payload))
		require.NoError(t, m.Ack())
		require.NoError(t, q2.Close())
	}
}

func receiptOf(seq, lease uint64) Receipt { return Receipt{Seq: seq, Lease: lease} }

// TestApplyIsAllOrNothing: a record that does not apply changes nothing,
// not even the counters or the position, when replay meets it; it is
// reported as ErrCorrupt.
func TestApplyIsAllOrNothing(t *testing.T) {
	f := newValidateFixture(t)
	defer f.q.Close()
	st := f.q.mu.st
	for name, r := range invalidChanges(f) {
		t.Run(name, func(t *testing.T) {
			f.q.mu.Lock()
			defer f.q.mu.Unlock()
			before := frozenBytes(t, st)
			err := st.apply(st.last+1, r, 10)
			require.ErrorIs(t, err, ErrCorrupt)
			require.ErrorIs(t, err, ErrInvalidChange)
			require.True(t, bytes.Equal(before, frozenBytes(t, st)), "state unchanged")
		})
	}
}

// copyDir copies the directory src as it is on disk now, without taking
// its lock, and returns the copy.
func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o700)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o600)
	})
	require.NoError(t, err)
	return dst
}

// TestApplyRandomRecords applies random records, most of which do not
// apply, to a state: each either applies or is refused leaving the state
// byte for byte as it was, and none panics.
func TestApplyRandomRecords(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	st := newState(&Options{DedupWindow: 1, cacheBytes: 1 << 10})
	applied := 0
	for lsn := uint64(1); lsn <= 2500; lsn++ {
		r := randomRecord(rng, lsn)
		before := frozenBytes(t, st)
		if err := st.apply(lsn, r, 30); err != nil {
			require.ErrorIs(t, err, ErrInvalidChange)
			require.True(t, bytes.Equal(before, frozenBytes(t, st)), "LSN %d: refused %s changed the state", lsn, opName(r.Op))
			continue
		}
		applied++
	}
	t.Logf("%d of 2500 records applied", applied)
	require.Greater(t, applied, 250, "the generator must reach states where records apply")
}

// randomRecord returns a record of a random kind naming recent LSNs, so
// that some apply.
func randomRecord(rng *rand.Rand, lsn uint64) *record {
	near := func() uint64 { return lsn - uint64(rng.IntN(int(min(lsn, 40)))) }
	keys := []string{"a", "b", "c"}
	r := &record{Op: op(rng.IntN(int(lastOp)) + 1), Seq: near(), Lease: near(), At: int64(lsn),
		Due: int64(lsn) + rng.Int64N(50), Key: keys[rng.IntN(len(keys))], Sort: []byte{byte(rng.IntN(4))},
		Payload: []byte("p"), ID: fmt.Sprintf("id%d", rng.IntN(20))}
	switch rng.IntN(4) {
	case 0:
		r.Flags = flagSorted
	case 1:
		r.Flags = flagCursor
	case 2:
		r.Flags = flagProducerID
	}
	if r.Op == opEnqueue && rng.IntN(2) == 0 {
		r.Due = 0
	}
	if r.Op == opAdvance {
		r.Flags &^= flagRecount
	}
	return r
}
