package index

import (
	"cmp"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
)

// checkAges checks the invariants of Sorted.ages, Sorted.ageDups and
// Sorted.stale against the index's own values:
//   - ages with ageDups holds, with each At as often as it is given, the At
//     of every key with pending values and of every leased batch with
//     values, and nothing else;
//   - a key's At is its true oldest's, or, while the key is stale, its
//     list's oldest, which is not after the true oldest;
//   - ages is in order, without repeats, and ageDups holds only counts > 0
//     of an At in ages;
//   - every stale key is a live key with a list; twos and lists hold only
//     live keys;
//   - every chunk of a list names its earliest (at, seq) as its oldest,
//     and no list or chunk is changeable in a generation after the
//     index's.
func checkAges(t *testing.T, s *Sorted, step int) {
	t.Helper()
	var entries []int64
	s.ages.tree.Ascend(func(r *run[int64]) bool {
		entries = append(entries, r.items...)
		return true
	})
	if len(entries) != s.ages.Len() {
		t.Fatalf("step %d: ages holds %d entries, Len %d", step, len(entries), s.ages.Len())
	}
	got := map[int64]int{}
	for i, at := range entries {
		if i > 0 && entries[i-1] >= at {
			t.Fatalf("step %d: ages out of order at %d: %d then %d", step, i, entries[i-1], at)
		}
		got[at] = 1
	}
	for at, n := range s.ageDups {
		if n <= 0 || got[at] == 0 {
			t.Fatalf("step %d: ageDups[%d] = %d, in ages %v", step, at, n, got[at] > 0)
		}
		got[at] += n
	}
	for kv := range s.stale {
		if s.keys.get(kv.name) != kv || s.lists[kv] == nil {
			t.Fatalf("step %d: stale key %q not a live key with a list", step, kv.name)
		}
	}
	for kv, two := range s.twos {
		if s.keys.get(kv.name) != kv || two == nil || s.lists[kv] != nil {
			t.Fatalf("step %d: twos entry of %q: live %v, two %v, list %v", step, kv.name, s.keys.get(kv.name) == kv, two, s.lists[kv])
		}
	}
	for kv, l := range s.lists {
		if s.keys.get(kv.name) != kv || l.n == 0 {
			t.Fatalf("step %d: lists entry of %q: live %v, n %d", step, kv.name, s.keys.get(kv.name) == kv, l.n)
		}
		if l.gen > s.gen {
			t.Fatalf("step %d: key %q: list of generation %d, index %d", step, kv.name, l.gen, s.gen)
		}
		for ci, c := range l.chunks {
			if c.gen() > s.gen {
				t.Fatalf("step %d: key %q chunk %d: generation %d, index %d", step, kv.name, ci, c.gen(), s.gen)
			}
			o := 0
			for i := range c.vals {
				if lessTimeKey(c.vals[i].timeKey, c.vals[o].timeKey) {
					o = i
				}
			}
			if c.oldestAt() != o {
				t.Fatalf("step %d: key %q chunk %d of %d values: oldest at %d, earliest at %d", step, kv.name, ci, len(c.vals), c.oldestAt(), o)
			}
		}
	}
	want := map[int64]int{}
	s.keys.each(func(kv *keyValues) bool {
		k := s.ref(kv)
		truth, age := scanOldest(k), k.age()
		if got := k.oldest(); got != truth {
			t.Fatalf("step %d: key %q: oldest %v, true oldest %v", step, kv.name, got, truth)
		}
		_, stale := s.stale[kv]
		if age != truth && !(stale && lessTimeKey(age, truth)) {
			t.Fatalf("step %d: key %q: age %v, true oldest %v, stale %v", step, kv.name, age, truth, stale)
		}
		want[age.at]++
		return true
	})
	s.batches.Ascend(func(b Batch) bool {
		if o, ok := batchOldest(b); ok {
			want[o.at]++
		}
		return true
	})
	if !maps.Equal(got, want) {
		t.Fatalf("step %d: ages hold %v, keys and batches give %v", step, got, want)
	}
}

// scanOldest returns the earliest (at, seq) of the key's values by a look
// at every one.
func scanOldest(k keyRef) timeKey {
	o := k.one.timeKey
	k.each(func(p *pendingValue) bool {
		if lessTimeKey(p.timeKey, o) {
			o = p.timeKey
		}
		return true
	})
	return o
}

// TestAgesInvariants drives a Sorted index through random publishes (some
// replacing a pending value, with another At), pulls, acks, returns, kills,
// drops, moves (of first, second and listed values), retakes, narrows,
// revives and snapshots, and checks the age invariants after every step,
// MinPublishedAt against a scan every few steps, and that snapshots stay as
// taken. With -short or -race it runs fewer steps.
func TestAgesInvariants(t *testing.T) {
	steps := 6000
	switch {
	case testing.Short():
		steps = 1000
	case raceEnabled:
		steps = 2000
	}
	random := rand.Uint64()
	t.Logf("random seed %d", random)
	for _, seed := range []uint64{1, 2, random} {
		for _, keys := range []int{3, 40} {
			for _, single := range []bool{false, true} {
				t.Run(fmt.Sprintf("seed=%d/keys=%d/single=%v", seed, keys, single), func(t *testing.T) {
					agesInvariantsRun(t, seed, keys, single, steps)
				})
			}
		}
	}
}

func agesInvariantsRun(t *testing.T, seed uint64, keys int, single bool, steps int) {
	rng := rand.New(rand.NewPCG(seed, 27))
	s := NewSorted(single)
	var lsn uint64
	var now int64 = 1000
	var pend []SortedValue // model of pending values (for choosing)
	leases := map[uint64]bool{}
	type frozen struct {
		snap *SortedSnapshot
		want []SortedValue
	}
	var snaps []frozen
	list := func(sn *SortedSnapshot) []SortedValue {
		var vs []SortedValue
		sn.Pending(func(v SortedValue) bool { vs = append(vs, v); return true })
		return vs
	}
	for step := range steps {
		switch op := rng.IntN(100); {
		case op < 35 || len(pend) == 0:
			lsn++
			v := SortedValue{Key: fmt.Sprint("k", rng.IntN(keys)), Sort: []byte{byte(rng.IntN(4))}, Seq: lsn, Loc: lsn,
				At: now - int64(rng.IntN(20)), Size: 1}
			s.Publish(v)
			pend = append(pend, v)
		case op < 40: // a publish replayed again, maybe with another At
			i := rng.IntN(len(pend))
			v := pend[i]
			if rng.IntN(2) == 0 {
				v.At += int64(rng.IntN(7)) - 3
			}
			s.Publish(v)
			s.bytes -= int64(v.Size)
			s.locs.remove(v.Loc)
			pend[i] = v
		case op < 50:
			if key, _, ok := s.Next(); ok {
				lsn++
				b := s.Take(key, lsn, now, now+10)
				leases[lsn] = true
				pend = slices.DeleteFunc(pend, func(v SortedValue) bool { return v.Key == b.Key })
			}
		case op < 60 && len(leases) > 0:
			ls := slices.Sorted(func(yield func(uint64) bool) {
				for l := range leases {
					if !yield(l) {
						return
					}
				}
			})
			l := ls[rng.IntN(len(ls))]
			switch rng.IntN(3) {
			case 0:
				s.Ack(l)
			case 1:
				b, _ := s.Return(l, 0, func(v SortedValue) bool { return rng.IntN(4) == 0 }, "x")
				s.Dead(func(d DeadValue) bool { return true })
				for _, v := range b.Values {
					if s.HasPendingValue(v) {
						pend = append(pend, v)
					}
				}
			case 2:
				b, _ := s.Batch(l)
				var seqs []uint64
				for _, v := range b.Values {
					if rng.IntN(2) == 0 {
						seqs = append(seqs, v.Seq)
					}
				}
				s.Narrow(l, seqs)
				for _, v := range b.Values {
					if s.HasPendingValue(v) && !slices.ContainsFunc(pend, func(p SortedValue) bool { return p.Seq == v.Seq }) {
						pend = append(pend, v)
					}
				}
				l = 0 // the batch stays leased
			}
			delete(leases, l)
		case op < 70:
			i := rng.IntN(len(pend))
			if !s.KillPending(pend[i], "k") {
				t.Fatalf("step %d: kill %v not found", step, pend[i])
			}
			pend = slices.Delete(pend, i, i+1)
		case op < 75:
			i := rng.IntN(len(pend))
			if !s.Drop(pend[i]) {
				t.Fatalf("step %d: drop %v not found", step, pend[i])
			}
			pend = slices.Delete(pend, i, i+1)
		case op < 85:
			i := rng.IntN(len(pend))
			lsn++
			if !s.MoveValue(pend[i], lsn, 2) {
				t.Fatalf("step %d: move %v not found", step, pend[i])
			}
			pend[i].Loc, pend[i].Size = lsn, 2
		case op < 88:
			var dead []uint64
			s.Dead(func(d DeadValue) bool { dead = append(dead, d.Seq); return true })
			if len(dead) > 0 {
				seq := dead[rng.IntN(len(dead))]
				d, _ := s.dead.Get(DeadValue{SortedValue: SortedValue{Seq: seq}})
				s.Revive(seq)
				d.Deliveries = 0
				pend = append(pend, d.SortedValue)
			}
		case op < 90:
			key := pend[rng.IntN(len(pend))].Key
			var seqs []uint64
			s.PendingOf(key, func(v SortedValue) bool {
				if rng.IntN(2) == 0 {
					seqs = append(seqs, v.Seq)
				}
				return true
			})
			lsn++
			slices.Sort(seqs)
			if len(seqs) > 0 {
				if _, ok := s.Retake(key, seqs, lsn, now, now+5); ok {
					leases[lsn] = true
					pend = slices.DeleteFunc(pend, func(v SortedValue) bool { return slices.Contains(seqs, v.Seq) })
				}
			}
		case op < 92:
			sn := s.Snapshot()
			snaps = append(snaps, frozen{sn, list(sn)})
		case op < 97:
			now += int64(rng.IntN(5))
		default:
			want, any := int64(0), false
			s.Values(func(v SortedValue) bool { return true })
			s.keys.each(func(kv *keyValues) bool {
				s.ref(kv).each(func(p *pendingValue) bool {
					if !any || p.at < want {
						want, any = p.at, true
					}
					return true
				})
				return true
			})
			s.batches.Ascend(func(b Batch) bool {
				for _, v := range b.Values {
					if !any || v.At < want {
						want, any = v.At, true
					}
				}
				return true
			})
			if got, ok := s.MinPublishedAt(); ok != any || got != want {
				t.Fatalf("step %d: MinPublishedAt %d %v, want %d %v", step, got, ok, want, any)
			}
			if len(s.stale) != 0 {
				t.Fatalf("step %d: %d stale keys after MinPublishedAt", step, len(s.stale))
			}
		}
		if len(pend) != s.Counts().Pending {
			t.Fatalf("step %d: test model has %d pending, index %d", step, len(pend), s.Counts().Pending)
		}
		checkAges(t, s, step)
	}
	for i, f := range snaps {
		got := list(f.snap)
		if !slices.EqualFunc(got, f.want, func(a, b SortedValue) bool {
			return a.Key == b.Key && string(a.Sort) == string(b.Sort) && a.Seq == b.Seq && a.Loc == b.Loc && a.At == b.At &&
				a.Size == b.Size && a.Deliveries == b.Deliveries
		}) {
			t.Fatalf("snapshot %d changed after it was taken", i)
		}
	}
	t.Logf("%d snapshots unchanged", len(snaps))
}

// TestAgesOfBigLists drives a Sorted index whose two keys hold thousands
// of pending values each, in many chunks (TestAgesInvariants' lists rarely
// fill one): publishes at random sort keys and times, so that values land
// inside chunks and split them, publishes replayed with another time,
// drops (often of the earliest value, so that a chunk's oldest leaves),
// kills, moves and snapshots. It checks the age invariants, each chunk's
// oldest among them, every few steps, MinPublishedAt against a scan, and
// that snapshots stay as taken. With -short or -race it runs fewer steps.
func TestAgesOfBigLists(t *testing.T) {
	steps := 30000
	if testing.Short() || raceEnabled {
		steps = 8000
	}
	random := rand.Uint64()
	t.Logf("random seed %d", random)
	for _, seed := range []uint64{1, 2, random} {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			chunks := bigListsRun(t, seed, steps)
			if chunks < 8 {
				t.Fatalf("the longest list had %d chunks: the test no longer builds big lists", chunks)
			}
			t.Logf("at most %d chunks in a list", chunks)
		})
	}
}

// bigListsRun runs TestAgesOfBigLists' steps from seed and returns the
// most chunks a list had.
func bigListsRun(t *testing.T, seed uint64, steps int) int {
	rng := rand.New(rand.NewPCG(seed, 28))
	s := NewSorted(false)
	var lsn uint64
	var pend []SortedValue // model of pending values (for choosing)
	at := func() int64 { return 1000 + int64(rng.IntN(100000)) }
	type frozen struct {
		snap *SortedSnapshot
		want []SortedValue
	}
	var snaps []frozen // a few of the snapshots taken, with their values then
	list := func(sn *SortedSnapshot) []SortedValue {
		var vs []SortedValue
		sn.Pending(func(v SortedValue) bool { vs = append(vs, v); return true })
		return vs
	}
	most := 0
	for step := range steps {
		switch op := rng.IntN(100); {
		case op < 55 || len(pend) < 10:
			lsn++
			v := SortedValue{Key: fmt.Sprint("k", rng.IntN(2)), Sort: []byte{byte(rng.IntN(256)), byte(rng.IntN(256))},
				Seq: lsn, Loc: lsn, At: at(), Size: 1}
			s.Publish(v)
			pend = append(pend, v)
		case op < 60: // a publish replayed again, with another At
			i := rng.IntN(len(pend))
			v := pend[i]
			v.At = at()
			s.Publish(v)
			s.bytes -= int64(v.Size)
			s.locs.remove(v.Loc)
			pend[i] = v
		case op < 75:
			i := rng.IntN(len(pend))
			if rng.IntN(2) == 0 { // the earliest: its chunk's oldest leaves
				for j, v := range pend {
					if v.At < pend[i].At || (v.At == pend[i].At && v.Seq < pend[i].Seq) {
						i = j
					}
				}
			}
			if !s.Drop(pend[i]) {
				t.Fatalf("step %d: drop %v not found", step, pend[i])
			}
			pend = slices.Delete(pend, i, i+1)
		case op < 85:
			i := rng.IntN(len(pend))
			if !s.KillPending(pend[i], "k") {
				t.Fatalf("step %d: kill %v not found", step, pend[i])
			}
			pend = slices.Delete(pend, i, i+1)
		case op < 92:
			i := rng.IntN(len(pend))
			lsn++
			if !s.MoveValue(pend[i], lsn, 2) {
				t.Fatalf("step %d: move %v not found", step, pend[i])
			}
			pend[i].Loc, pend[i].Size = lsn, 2
		case op < 94:
			sn := s.Snapshot()
			if len(snaps) < 8 || rng.IntN(8) == 0 {
				snaps = append(snaps, frozen{sn, list(sn)})
			}
		default:
			want := slices.MinFunc(pend, func(a, b SortedValue) int { return cmp.Compare(a.At, b.At) }).At
			if got, ok := s.MinPublishedAt(); !ok || got != want {
				t.Fatalf("step %d: MinPublishedAt %d %v, want %d", step, got, ok, want)
			}
		}
		if len(pend) != s.Counts().Pending {
			t.Fatalf("step %d: test model has %d pending, index %d", step, len(pend), s.Counts().Pending)
		}
		if step%16 == 0 {
			checkAges(t, s, step)
		}
		for _, l := range s.lists {
			most = max(most, len(l.chunks))
		}
	}
	checkAges(t, s, steps)
	for i, f := range snaps {
		if !slices.EqualFunc(list(f.snap), f.want, func(a, b SortedValue) bool {
			return a.Key == b.Key && string(a.Sort) == string(b.Sort) && a.Seq == b.Seq && a.Loc == b.Loc && a.At == b.At &&
				a.Size == b.Size && a.Deliveries == b.Deliveries
		}) {
			t.Fatalf("snapshot %d changed after it was taken", i)
		}
	}
	return most
}
