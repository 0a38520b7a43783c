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
	"github.com/walq/walq/index"
	"github.com/walq/walq/recovery"
)

// TestReplayOwnsWhatItKeeps: the state a replay rebuilds keeps nothing of
// the bytes the log's reader hands to state.Apply, which are the
// reader's until its next call. Each record after the snapshot is applied
// from one buffer that is overwritten as soon as Apply returns, as the
// reader reuses its own; the state must be the one the same records give
// applied from buffers never written again: the same snapshot body (sort
// keys, ids, reasons, dedup ids) and the same cached payloads of a sorted
// queue. Both kinds of queue, with and without Salvage (which decodes
// copies), on the closed queue and on the crash images taken while each
// compaction wrote its snapshots, whose logs hold the compaction's copies
// (moves) and advances after the snapshot. Four seeds of each kind, one
// under the race detector.
func TestReplayOwnsWhatItKeeps(t *testing.T) {
	seeds := uint64(4)
	if raceEnabled {
		seeds = 1
	}
	for _, kind := range []string{"sorted", "ack"} {
		for seed := range seeds {
			t.Run(fmt.Sprintf("%s/seed=%d", kind, seed), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, 44))
				dir := t.TempDir()
				var images []string
				o := Options{ManualRequeue: true, AckTimeout: time.Hour, MaxDeliveries: 2, DedupWindow: time.Hour,
					SegmentSize: 4096, manualCompact: true, snapshotStep: func(step string) {
						if step == "written" {
							images = append(images, copyQueueDir(t, dir))
						}
					}}
				if kind == "sorted" {
					o = runSortedForReplay(t, rng, dir, o)
				} else {
					o = runAckForReplay(t, rng, dir, o)
				}
				ops := map[op]int{}
				for _, d := range append(images, dir) {
					for _, salvage := range []bool{false, true} {
						o.Salvage = salvage
						requireReplayOwns(t, d, &o, ops)
					}
				}
				t.Logf("%d images; records replayed by op: %v", len(images), ops)
				require.NotZero(t, ops[opMove], "no move replayed")
			})
		}
	}
}

// requireReplayOwns replays the log of the queue in dir after its snapshot
// into three states loaded from it: one record by record from a
// scribbled buffer, one from copies, and one from records decoded whole
// (decodeRecord: no views, every ID a string), and requires the three to
// be the same. It counts the records replayed by op in ops.
func requireReplayOwns(t *testing.T, dir string, o *Options, ops map[op]int) {
	t.Helper()
	scribbled, snapLSN, err := loadSnapshot(dir, o)
	require.NoError(t, err)
	copied, _, err := loadSnapshot(dir, o)
	require.NoError(t, err)
	whole, _, err := loadSnapshot(dir, o)
	require.NoError(t, err)
	log, err := openReadOnly(dir)
	require.NoError(t, err)
	defer log.Close()
	require.LessOrEqual(t, log.FirstLSN(), snapLSN+1, "the log lost records the snapshot needs")

	var buf []byte
	_, err = recovery.Replay(log, snapLSN+1, func(lsn uint64, b []byte) error {
		ops[peekOp(b)]++
		buf = append(buf[:0], b...)
		err := scribbled.Apply(lsn, buf)
		for i := range buf {
			buf[i] = 0xa5
		}
		return err
	})
	require.NoError(t, err)
	_, err = recovery.Replay(log, snapLSN+1, func(lsn uint64, b []byte) error {
		return copied.Apply(lsn, bytes.Clone(b))
	})
	require.NoError(t, err)

	_, err = recovery.Replay(log, snapLSN+1, func(lsn uint64, b []byte) error {
		return applyWhole(whole, lsn, b)
	})
	require.NoError(t, err)

	require.Equal(t, snapshotBody(t, copied), snapshotBody(t, scribbled), "the replayed states differ")
	require.Equal(t, cachedPayloads(copied), cachedPayloads(scribbled), "the replayed states cache different payloads")
	require.Equal(t, copied.sorted.CachedBytes(), scribbled.sorted.CachedBytes())
	require.Equal(t, snapshotBody(t, whole), snapshotBody(t, scribbled), "the replay differs from one of records decoded whole")
	require.Equal(t, cachedPayloads(whole), cachedPayloads(scribbled), "the replay caches other payloads than one of records decoded whole")
}

// applyWhole is st.Apply with the record decoded whole (decodeRecord),
// whatever st.salvage says.
func applyWhole(st *state, lsn uint64, b []byte) error {
	var r record
	if err := decodeRecord(b, &r); err != nil {
		return err
	}
	if st.salvage {
		return st.applySalvaging(lsn, &r, len(b))
	}
	return st.apply(lsn, &r, len(b))
}

// TestReplayEnqueueAllocatesNothing: replaying a plain enqueue record (no
// producer id, no delay; its id and payload not kept) allocates nothing,
// and the state counts it.
func TestReplayEnqueueAllocatesNothing(t *testing.T) {
	st := newState(&Options{})
	b := encodeRecord(nil, &record{Op: opEnqueue, ID: "0123456789abcdef0123", At: 1, Payload: make([]byte, 100)})
	lsn := uint64(0)
	allocs := testing.AllocsPerRun(100, func() {
		lsn++
		if err := st.Apply(lsn, b); err != nil {
			t.Fatal(err)
		}
	})
	require.Zero(t, allocs, "allocations per replayed enqueue")
	require.Equal(t, int64(lsn), st.pending)
}

// snapshotBody returns the snapshot body of st.
func snapshotBody(t *testing.T, st *state) []byte {
	t.Helper()
	var b bytes.Buffer
	require.NoError(t, st.freeze().encodeTo(&b))
	return b.Bytes()
}

// cachedPayloads returns the payloads st's sorted index caches, by Seq,
// of its pending, dead and leased values.
func cachedPayloads(st *state) map[uint64]string {
	out := map[uint64]string{}
	add := func(v index.SortedValue) bool {
		if p, ok := st.sorted.Cached(v.Seq); ok {
			out[v.Seq] = string(p)
		}
		return true
	}
	st.sorted.Values(add)
	st.sorted.Batches(func(b index.Batch) bool {
		for _, v := range b.Values {
			add(v)
		}
		return true
	})
	return out
}

// copyQueueDir copies the queue directory src, as it is on disk now, to a
// new directory and returns it.
func copyQueueDir(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
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

// runSortedForReplay makes random publishes (of varied sort keys, keys
// and payloads), pulls, acks, nacks, extends, dead-letterings, requeues
// and purges of dead values and compactions on a sorted queue in dir
// opened with o, leaves some values pending, some leased and some dead,
// closes it and returns its options.
func runSortedForReplay(t *testing.T, rng *rand.Rand, dir string, o Options) Options {
	ctx := context.Background()
	s, err := OpenSorted[int64](dir, &SortedOptions{Options: o})
	require.NoError(t, err)
	var kept []*Batch[int64]
	for i := range 300 {
		switch op := rng.IntN(20); {
		case op < 8:
			p := bytes.Repeat([]byte{byte('a' + i%26)}, rng.IntN(40))
			require.NoError(t, s.Publish(ctx, rng.Int64N(40)-10, fmt.Sprint("key", rng.IntN(5)), p))
		case op < 11:
			bs, err := s.TryPull(1 + rng.IntN(3))
			if err == nil {
				kept = append(kept, bs...)
			}
		case op < 16 && len(kept) > 0:
			j := rng.IntN(len(kept))
			b := kept[j]
			kept = append(kept[:j], kept[j+1:]...)
			switch rng.IntN(4) {
			case 0:
				require.NoError(t, b.Ack())
			case 1:
				require.NoError(t, b.Nack(0))
			case 2:
				require.NoError(t, b.DeadLetter(fmt.Sprint("reason ", i)))
			default:
				require.NoError(t, b.Extend(time.Hour))
				kept = append(kept, b)
			}
		case op < 17:
			ds, err := s.DeadValues(0, 1)
			require.NoError(t, err)
			if len(ds) > 0 {
				require.NoError(t, s.PurgeDead(ds[0].Seq))
			}
		case op < 18:
			ds, err := s.DeadValues(0, 1)
			require.NoError(t, err)
			if len(ds) > 0 {
				require.NoError(t, s.RequeueDead(ds[0].Seq))
			}
		case op < 19:
			require.NoError(t, s.Compact())
		}
	}
	o = s.q.opts
	require.NoError(t, s.Close())
	return o
}

// runAckForReplay makes random enqueues (with and without a producer id,
// headers and a delay), dequeues, acks, nacks, extends, dead-letterings,
// requeues and purges of dead letters and compactions on a queue in dir
// opened with o, closes it and returns its options.
func runAckForReplay(t *testing.T, rng *rand.Rand, dir string, o Options) Options {
	ctx := context.Background()
	q, err := Open(dir, &o)
	require.NoError(t, err)
	var kept []*Message
	var dead []string
	for i := range 1000 {
		switch op := rng.IntN(20); {
		case op < 8:
			var opts []EnqueueOption
			if rng.IntN(2) == 0 {
				opts = append(opts, WithID(fmt.Sprint("producer-id-", i)))
			}
			if rng.IntN(3) == 0 {
				opts = append(opts, WithHeaders(map[string]string{"h": fmt.Sprint("header ", i)}))
			}
			if rng.IntN(4) == 0 {
				opts = append(opts, WithDelay(time.Hour))
			}
			_, err := q.Enqueue(ctx, bytes.Repeat([]byte{'m'}, rng.IntN(40)), opts...)
			require.NoError(t, err)
		case op < 12:
			if m, err := q.TryDequeue(); err == nil {
				kept = append(kept, m)
			}
		case op < 17 && len(kept) > 0:
			j := rng.IntN(len(kept))
			m := kept[j]
			kept = append(kept[:j], kept[j+1:]...)
			switch rng.IntN(4) {
			case 0:
				require.NoError(t, m.Ack())
			case 1:
				require.NoError(t, m.Nack(0))
			case 2:
				require.NoError(t, m.DeadLetter(fmt.Sprint("reason ", i)))
				dead = append(dead, m.ID)
			default:
				require.NoError(t, m.Extend(time.Hour))
				kept = append(kept, m)
			}
		case op < 18 && len(dead) > 0:
			id := dead[0]
			dead = dead[1:]
			if rng.IntN(2) == 0 {
				require.NoError(t, q.RequeueDead(id))
			} else {
				require.NoError(t, q.PurgeDead(id))
			}
		case op < 19:
			require.NoError(t, q.Compact())
		}
	}
	o = q.opts
	require.NoError(t, q.Close())
	return o
}
