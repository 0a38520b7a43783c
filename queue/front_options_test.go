package queue

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/recovery"
)

// examineFront (Verify, Repair, an open refusing a damaged snapshot)
// loads the snapshot a salvage falls back to with the default Options,
// where the salvage loads it with the application's. The verdict on a
// truncation marker depends only on the log the state needs (Need), which
// the options do not change: SingleFlight, DedupWindow, Salvage and the
// value cache change how values are pulled, ids forgotten, records
// replayed and payloads kept, not what the state's messages and values
// need of the log.
func TestFrontVerdictIgnoresOptions(t *testing.T) {
	ctx := context.Background()
	t.Run("sorted", func(t *testing.T) {
		dir := t.TempDir()
		so := &SortedOptions{Options: Options{Salvage: false, DedupWindow: time.Hour, AckTimeout: time.Minute, manualCompact: true},
			SingleFlight: true}
		s, err := OpenSorted[int64](dir, so)
		require.NoError(t, err)
		for i, k := range []string{"K", "K", "M", "N"} {
			require.NoError(t, s.Publish(ctx, int64(i+1), k, []byte("v")))
		}
		_, err = s.TryPull(1) // K's first value leased: K not pullable under single flight
		require.NoError(t, err)
		require.NoError(t, s.q.snapshot())
		sameNeed(t, dir, &s.q.opts)
		require.NoError(t, s.Close())
	})
	t.Run("ack", func(t *testing.T) {
		dir := t.TempDir()
		q, err := Open(dir, &Options{DedupWindow: time.Hour, AckTimeout: time.Minute, manualCompact: true})
		require.NoError(t, err)
		for _, id := range []string{"a", "b", "c", "d"} {
			_, err := q.Enqueue(ctx, []byte(id), WithID(id))
			require.NoError(t, err)
		}
		_, err = q.Enqueue(ctx, []byte("later"), WithDelay(time.Hour))
		require.NoError(t, err)
		m, err := q.TryDequeue()
		require.NoError(t, err)
		require.NoError(t, m.Ack())
		_, err = q.TryDequeue() // b leased
		require.NoError(t, err)
		require.NoError(t, q.snapshot())
		opts := q.opts
		opts.Salvage = true
		sameNeed(t, dir, &opts)
		require.NoError(t, q.Close())
	})
}

// sameNeed loads dir's newest snapshot as examineFront does and with o,
// and requires the two states to need the same log.
func sameNeed(t *testing.T, dir string, o *Options) {
	t.Helper()
	def, _, err := recovery.Load(nil, dir, decoder{&Options{}})
	require.NoError(t, err)
	own, lsn, err := recovery.Load(nil, dir, decoder{o})
	require.NoError(t, err)
	require.NotZero(t, lsn)
	require.Equal(t, own.Need(), def.Need(), "the caller's options change what the state needs of the log")
	require.Less(t, own.Need(), lsn, "the state needs records before the snapshot, or the check proves nothing")
}
