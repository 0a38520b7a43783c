package index

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// An entry left far behind (a dead letter) does not hold the window open:
// while a million later entries come and go one at a time, the window
// stays a few chunks long and the old entry stays found.
func TestSeqsSpillsWhatIsFarBehind(t *testing.T) {
	s := newSeqs()
	s.Put(Entry{Seq: 5, State: Dead})
	for seq := uint64(100); seq < 1_000_000; seq += 3 {
		s.Put(Entry{Seq: seq, State: Leased})
		_, ok := s.Delete(seq)
		require.True(t, ok)
		require.LessOrEqual(t, len(s.chunks), spanSlack+1, "seq %d", seq)
	}
	e, ok := s.Get(5)
	require.True(t, ok)
	require.Equal(t, Dead, e.State)
	require.Equal(t, 1, s.Len())
}

// A window of live entries at one entry in three seqs (a queue's enqueue,
// lease and ack records interleaved) is kept in the window, not spilled.
func TestSeqsKeepsASparseWindow(t *testing.T) {
	s := newSeqs()
	for seq := uint64(1); seq < 300_000; seq += 3 {
		s.Put(Entry{Seq: seq})
	}
	require.Zero(t, s.old.Len())
	require.Equal(t, 100_000, s.live)
}

// seqs agrees with a map under random puts and deletes of seqs from
// several regimes (a moving window, far jumps, seqs behind the window), and
// every frozen copy keeps what it held when it was taken.
func TestSeqsModel(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	s := newSeqs()
	model := map[uint64]Entry{}
	type frozen struct {
		view seqs
		want map[uint64]Entry
	}
	var views []frozen
	next := uint64(1)
	pick := func() uint64 {
		switch rng.IntN(12) {
		case 0:
			return 1 + rng.Uint64N(next+1000) // anywhere, behind the window too
		case 10:
			if s.base > 100 {
				return s.base - 1 - rng.Uint64N(100) // just behind the window
			}
			return 1 + rng.Uint64N(next)
		case 11:
			for k := range model {
				return k // an update
			}
			return next
		case 1:
			next += rng.Uint64N(100_000) // a far jump
			return next
		default:
			next += 1 + rng.Uint64N(4)
			return next
		}
	}
	for step := range 30_000 {
		switch r := rng.IntN(10); {
		case r < 5:
			seq := pick()
			e := Entry{Seq: seq, Deliveries: uint32(step)}
			old, had := s.Put(e)
			want, wantHad := model[seq]
			require.Equal(t, wantHad, had, "step %d seq %d", step, seq)
			require.Equal(t, want, old)
			model[seq] = e
		case r < 9 && len(model) > 0:
			// Delete mostly the oldest, as a queue settles.
			var seq uint64
			for k := range model {
				if seq == 0 || (rng.IntN(4) > 0 && k < seq) || rng.IntN(8) == 0 {
					seq = k
				}
				if rng.IntN(16) == 0 {
					break
				}
			}
			e, ok := s.Delete(seq)
			require.True(t, ok, "step %d seq %d", step, seq)
			require.Equal(t, model[seq], e)
			delete(model, seq)
		default:
			if rng.IntN(50) == 0 {
				want := make(map[uint64]Entry, len(model))
				for k, v := range model {
					want[k] = v
				}
				views = append(views, frozen{s.freeze(), want})
			}
		}
		seq := 1 + rng.Uint64N(next+10)
		got, ok := s.Get(seq)
		want, wantOK := model[seq]
		require.Equal(t, wantOK, ok, "step %d get %d", step, seq)
		require.Equal(t, want, got)
		require.Equal(t, len(model), s.Len())
		for k, v := range model { // an entry held, wherever it is
			got, ok := s.Get(k)
			require.True(t, ok, "step %d get %d", step, k)
			require.Equal(t, v, got)
			break
		}
		if m, ok := s.old.Max(); ok {
			require.Less(t, m.Seq, s.base, "step %d: old reaches into the window", step)
		}
	}
	requireSame(t, model, &s)
	for _, v := range views {
		requireSame(t, v.want, &v.view)
	}
}

// requireSame checks that s holds exactly want, in Seq order.
func requireSame(t *testing.T, want map[uint64]Entry, s *seqs) {
	t.Helper()
	require.Equal(t, len(want), s.Len())
	var last uint64
	n := 0
	s.Ascend(func(e Entry) bool {
		require.Greater(t, e.Seq, last)
		require.Equal(t, want[e.Seq], e)
		last = e.Seq
		n++
		return true
	})
	require.Equal(t, len(want), n)
}

// Seq 0, which marks an empty slot in the window, is still kept.
func TestSeqsZero(t *testing.T) {
	s := newSeqs()
	s.Put(Entry{Seq: 0, ID: "zero"})
	s.Put(Entry{Seq: 1, ID: "one"})
	e, ok := s.Get(0)
	require.True(t, ok)
	require.Equal(t, "zero", e.ID)
	require.Equal(t, 2, s.Len())
	_, ok = s.Delete(0)
	require.True(t, ok)
	require.Equal(t, 1, s.Len())
}

// A window grown back towards the front never covers an entry that was
// spilled into old: every Seq in old stays below base, and Get finds it.
func TestSeqsReachBackStopsAboveOld(t *testing.T) {
	s := newSeqs()
	for _, seq := range []uint64{60, 90} {
		s.Put(Entry{Seq: seq})
	}
	for seq := uint64(92); seq < 124; seq++ { // a full chunk after 60's
		s.Put(Entry{Seq: seq})
	}
	far := 60 + uint64(s.maxSpan())*slotsPerChunk // spills 60's chunk, not 92's
	s.Put(Entry{Seq: far})
	require.Equal(t, uint64(92), s.base)
	_, ok := s.Delete(far) // the window shrinks back to one chunk
	require.True(t, ok)
	s.Put(Entry{Seq: 91}) // just behind the window, just above 90 in old
	for _, seq := range []uint64{60, 90, 91, 92, 123} {
		_, ok := s.Get(seq)
		require.True(t, ok, "seq %d", seq)
	}
	if m, ok := s.old.Max(); ok {
		require.Less(t, m.Seq, s.base)
	}
	require.Equal(t, 35, s.Len())
}

// An entry behind the window stays found when the window, at the top of
// the Seq range, empties: base moves past the emptied chunks but never
// wraps around below an entry in old.
func TestSeqsTopOfRange(t *testing.T) {
	s := newSeqs()
	top := uint64(math.MaxUint64 - 5)
	s.Put(Entry{Seq: top, ID: "top"})
	s.Put(Entry{Seq: 30, ID: "far behind"}) // too far to reach back to: old
	_, ok := s.Delete(top)
	require.True(t, ok)
	e, ok := s.Get(30)
	require.True(t, ok, "Get(30) after the window emptied")
	require.Equal(t, "far behind", e.ID)
	s.Put(Entry{Seq: math.MaxUint64, ID: "last"})
	_, ok = s.Get(math.MaxUint64)
	require.True(t, ok)
	require.Equal(t, 2, s.Len())
	_, ok = s.Delete(30)
	require.True(t, ok, "Delete(30) after the window emptied")
	_, ok = s.Delete(math.MaxUint64)
	require.True(t, ok)
	require.Zero(t, s.Len())
}
