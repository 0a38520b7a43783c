package index_test

import (
	"bytes"
	"cmp"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/walq/walq/index"
)

// sortedModel is a naive Sorted: every value in a slice, every question
// answered by a scan. It holds what a sorted queue relies on: which key is
// pulled next, what a batch holds, where a returned value goes, what the
// counts, Bytes and MinLoc are.
type sortedModel struct {
	single  bool
	pending []index.SortedValue    // pending values, in no order
	batches map[uint64]index.Batch // leased batches by lease
	dead    map[uint64]index.DeadValue
	held    map[string]int64 // key -> hold time, until the key is pulled or has no pending value
	now     int64            // the time of the last release: holds after it hold their keys back
}

func newSortedModel(single bool) *sortedModel {
	return &sortedModel{single: single, batches: map[uint64]index.Batch{},
		dead: map[uint64]index.DeadValue{}, held: map[string]int64{}, now: math.MinInt64}
}

func cmpValue(a, b index.SortedValue) int {
	return cmp.Or(bytes.Compare(a.Sort, b.Sort), cmp.Compare(a.Seq, b.Seq))
}

// keyValues returns the pending values of key in sort order.
func (m *sortedModel) keyValues(key string) []index.SortedValue {
	var out []index.SortedValue
	for _, v := range m.pending {
		if v.Key == key {
			out = append(out, v)
		}
	}
	slices.SortFunc(out, cmpValue)
	return out
}

func (m *sortedModel) inflight(key string) bool {
	for _, b := range m.batches {
		if b.Key == key {
			return true
		}
	}
	return false
}

// pullable returns the keys that may be pulled, in pull order: smallest
// pending sort key first, then by name.
func (m *sortedModel) pullable() []string {
	m.endHolds()
	first := map[string][]byte{}
	for _, v := range m.pending {
		if s, ok := first[v.Key]; !ok || bytes.Compare(v.Sort, s) < 0 {
			first[v.Key] = v.Sort
		}
	}
	var keys []string
	for k := range first {
		if at, held := m.held[k]; held && at > m.now || m.single && m.inflight(k) {
			continue
		}
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		return cmp.Or(bytes.Compare(first[a], first[b]), strings.Compare(a, b))
	})
	return keys
}

func (m *sortedModel) take(key string, lease uint64, at, due int64) index.Batch {
	b := index.Batch{Lease: lease, Key: key, At: at, Due: due}
	for _, v := range m.keyValues(key) {
		v.Deliveries++
		b.Values = append(b.Values, v)
	}
	m.pending = slices.DeleteFunc(m.pending, func(v index.SortedValue) bool { return v.Key == key })
	m.batches[lease] = b
	return b
}

// retake is Sorted.Retake.
func (m *sortedModel) retake(key string, seqs []uint64, lease uint64, at, due int64) (index.Batch, bool) {
	b := index.Batch{Lease: lease, Key: key, At: at, Due: due}
	for _, v := range m.keyValues(key) {
		if slices.Contains(seqs, v.Seq) {
			v.Deliveries++
			b.Values = append(b.Values, v)
		}
	}
	if len(b.Values) == 0 {
		return index.Batch{}, false
	}
	m.pending = slices.DeleteFunc(m.pending, func(v index.SortedValue) bool {
		return v.Key == key && slices.Contains(seqs, v.Seq)
	})
	m.batches[lease] = b
	return b, true
}

func (m *sortedModel) ret(lease uint64, hold int64, limit uint32, reason string) (index.Batch, bool) {
	b, ok := m.batches[lease]
	if !ok {
		return b, false
	}
	delete(m.batches, lease)
	back := false
	for _, v := range b.Values {
		if limit > 0 && v.Deliveries >= limit {
			m.dead[v.Seq] = index.DeadValue{SortedValue: v, Reason: reason}
			continue
		}
		m.pending = append(m.pending, v)
		back = true
	}
	if hold != 0 && back { // a batch whose values all went dead holds nothing back
		if was, ok := m.held[b.Key]; !ok || hold > was {
			m.held[b.Key] = hold // a key keeps its latest hold
		}
	}
	return b, true
}

func (m *sortedModel) release(now int64) { m.now = now }

// endHolds ends the holds of keys left without pending values (pulled,
// or their values dead or dropped).
func (m *sortedModel) endHolds() {
	maps.DeleteFunc(m.held, func(k string, _ int64) bool { return len(m.keyValues(k)) == 0 })
}

// all calls fn with a pointer to every pending, leased and dead value.
func (m *sortedModel) all(fn func(v *index.SortedValue)) {
	for i := range m.pending {
		fn(&m.pending[i])
	}
	for _, b := range m.batches {
		for i := range b.Values {
			fn(&b.Values[i])
		}
	}
	for seq, d := range m.dead {
		fn(&d.SortedValue)
		m.dead[seq] = d
	}
}

// expired returns the batches due at or before now, by deadline and lease.
func (m *sortedModel) expired(now int64, max int) []index.Batch {
	var out []index.Batch
	for _, b := range m.batches {
		if b.Due <= now {
			out = append(out, b)
		}
	}
	slices.SortFunc(out, func(a, b index.Batch) int { return cmp.Or(cmp.Compare(a.Due, b.Due), cmp.Compare(a.Lease, b.Lease)) })
	return out[:min(max, len(out))]
}

// modelKeys are key names that are easy to get wrong: empty, equal after
// a prefix, with NUL bytes, long, and long ones that differ at the end.
var modelKeys = func() []string {
	long := strings.Repeat("k", 5000)
	return []string{"", "a", "a\x00", "a\x00b", "ab", "b", "\x00", "\xff", long, long + "\x00", long + "a"}
}()

// modelSort returns a sort key from a small alphabet, so that values of
// one key and first values of different keys are often equal: empty (the
// encoded form of nothing), one or two bytes of 0x00, 0x01, 0x7f, 0xff.
func modelSort(rng *rand.Rand) []byte {
	alphabet := []byte{0x00, 0x01, 0x7f, 0xff}
	var b []byte
	for range rng.IntN(3) {
		b = append(b, alphabet[rng.IntN(len(alphabet))])
	}
	return b
}

// TestSortedAgainstNaiveModel drives a Sorted index and sortedModel with the
// same random publishes, pulls, acks, nacks (with and without a hold, with
// a delivery limit), extensions, expiries, dead-letters, kills of pending
// values, revives, purges, drops, moves (of leased values too), retakes,
// narrowings and hold releases (the clock now and then stepping back),
// with and without single flight, and
// compares after every step the pull order, every batch, the counts,
// Bytes, MinLoc, the earliest deadline, hold and publish time of a pending
// or leased value, and the dead set. Every few steps it rebuilds an index
// from a snapshot as a queue loads one (Publish, PutDead, PutBatch, Hold)
// and requires the two to agree, and snapshots taken on the way must never
// change. With -race, a third of the steps (test.sh's step plain runs
// them all).
func TestSortedAgainstNaiveModel(t *testing.T) {
	steps := 6000
	if raceEnabled { // every kind of step still runs, in a third as many
		steps = 2000
	}
	for _, single := range []bool{false, true} {
		for _, cache := range []int{0, 1} {
			t.Run(fmt.Sprintf("single=%v/values=%d", single, 300*(1+cache*5)), func(t *testing.T) {
				seed := rand.Uint64()
				t.Logf("seed %d", seed)
				r := &modelRun{t: t, rng: rand.New(rand.NewPCG(seed, 3)), s: index.NewSorted(single), m: newSortedModel(single),
					maxPending: 300 * (1 + cache*5)}
				for step := range steps {
					r.step = step
					r.op()
					r.check(r.s, "index")
					if step%250 == 0 {
						r.check(restore(r.s.Snapshot(), single, r.m.now), "restored")
					}
				}
				r.checkFrozen()
			})
		}
	}
}

type frozenView struct {
	snap *index.SortedSnapshot
	want snapView
}

type modelRun struct {
	t          *testing.T
	rng        *rand.Rand
	s          *index.Sorted
	m          *sortedModel
	step       int
	lsn        uint64 // last LSN given out
	now        int64  // unix ns
	maxPending int
	frozen     []frozenView
}

func (r *modelRun) next() uint64 { r.lsn++; return r.lsn }

func (r *modelRun) fatalf(format string, args ...any) {
	r.t.Helper()
	r.t.Fatalf("step %d: %s", r.step, fmt.Sprintf(format, args...))
}

// anyBatch returns a leased batch of the model, chosen at random.
func (r *modelRun) anyBatch() (index.Batch, bool) {
	if len(r.m.batches) == 0 {
		return index.Batch{}, false
	}
	leases := slices.Sorted(maps.Keys(r.m.batches))
	return r.m.batches[leases[r.rng.IntN(len(leases))]], true
}

func (r *modelRun) anyDead() (index.DeadValue, bool) {
	if len(r.m.dead) == 0 {
		return index.DeadValue{}, false
	}
	seqs := slices.Sorted(maps.Keys(r.m.dead))
	return r.m.dead[seqs[r.rng.IntN(len(seqs))]], true
}

func (r *modelRun) op() {
	switch op := r.rng.IntN(100); {
	case op < 35:
		if len(r.m.pending) < r.maxPending {
			r.publish()
		}
	case op < 47:
		r.pull()
	case op < 55:
		r.settle()
	case op < 60:
		r.expire()
	case op < 64:
		r.revive()
	case op < 67:
		r.purge()
	case op < 72:
		r.drop()
	case op < 80:
		r.move()
	case op < 84:
		r.retake()
	case op < 86:
		r.narrow()
	case op < 90:
		r.now += int64(r.rng.IntN(7) - 2) // now and then back, as a stepped clock
		r.s.Release(r.now)
		r.m.release(r.now)
	case op < 92:
		r.frozen = append(r.frozen, frozenView{r.s.Snapshot(), r.m.view()})
	case op < 95:
		r.kill()
	}
}

func (r *modelRun) publish() {
	seq := r.next()
	v := index.SortedValue{Key: modelKeys[r.rng.IntN(len(modelKeys))], Sort: modelSort(r.rng), Seq: seq, Loc: seq,
		At: r.now - int64(r.rng.IntN(8)), Size: uint32(r.rng.IntN(100) + 1)}
	r.s.Publish(v)
	r.m.pending = append(r.m.pending, v)
}

// pull takes the next key, as a queue's pull does.
func (r *modelRun) pull() {
	r.s.Release(r.now)
	r.m.release(r.now)
	order := r.m.pullable()
	key, sort, ok := r.s.Next()
	if ok != (len(order) > 0) {
		r.fatalf("Next: %v, model's pull order %q", ok, order)
	}
	if !ok {
		return
	}
	want := r.m.keyValues(order[0])
	if key != order[0] || !bytes.Equal(sort, want[0].Sort) {
		r.fatalf("Next: key %q sort %x, want %q sort %x", key, sort, order[0], want[0].Sort)
	}
	lease := r.next()
	got := r.s.Take(key, lease, r.now, r.now+int64(r.rng.IntN(10)))
	r.requireBatch(got, r.m.take(key, lease, got.At, got.Due), "Take")
}

func (r *modelRun) requireBatch(got, want index.Batch, what string) {
	r.t.Helper()
	if !sameBatch(got, want) {
		r.fatalf("%s: batch\n%s\nwant\n%s", what, describeBatch(got), describeBatch(want))
	}
}

// settle acks, nacks (maybe with a hold and a delivery limit), extends or
// dead-letters a leased batch.
func (r *modelRun) settle() {
	b, ok := r.anyBatch()
	if !ok {
		return
	}
	switch r.rng.IntN(4) {
	case 0:
		got, ok := r.s.Ack(b.Lease)
		delete(r.m.batches, b.Lease)
		if !ok {
			r.fatalf("Ack %d: not found", b.Lease)
		}
		r.requireBatch(got, b, "Ack")
	case 1:
		var hold int64
		if r.rng.IntN(2) == 0 {
			hold = r.now + int64(r.rng.IntN(6))
		}
		limit := uint32(r.rng.IntN(4))
		got, ok := r.s.Return(b.Lease, hold, func(v index.SortedValue) bool { return limit > 0 && v.Deliveries >= limit }, "limit")
		r.m.ret(b.Lease, hold, limit, "limit")
		if !ok {
			r.fatalf("Return %d: not found", b.Lease)
		}
		r.requireBatch(got, b, "Return")
	case 2:
		due := r.now + int64(r.rng.IntN(10))
		if !r.s.Extend(b.Lease, due) {
			r.fatalf("Extend %d: not found", b.Lease)
		}
		b.Due = due
		r.m.batches[b.Lease] = b
	case 3:
		got, ok := r.s.Return(b.Lease, 0, func(index.SortedValue) bool { return true }, "dead")
		r.m.ret(b.Lease, 0, 1, "dead")
		if !ok {
			r.fatalf("Return (dead) %d: not found", b.Lease)
		}
		r.requireBatch(got, b, "Return (dead)")
	}
}

// expire returns the batches whose lease ran out, as the housekeeper does.
func (r *modelRun) expire() {
	max := 1 + r.rng.IntN(3)
	got, want := r.s.Expired(r.now, max), r.m.expired(r.now, max)
	if len(got) != len(want) {
		r.fatalf("Expired: %d batches, want %d", len(got), len(want))
	}
	for i := range got {
		r.requireBatch(got[i], want[i], "Expired")
		if _, ok := r.s.Return(got[i].Lease, 0, func(v index.SortedValue) bool { return v.Deliveries >= 3 }, "expired"); !ok {
			r.fatalf("Return of expired %d: not found", got[i].Lease)
		}
		r.m.ret(got[i].Lease, 0, 3, "expired")
	}
}

func (r *modelRun) revive() {
	d, ok := r.anyDead()
	if !ok {
		return
	}
	if !r.s.HasDead(d.Seq) || !r.s.Revive(d.Seq) {
		r.fatalf("Revive %d: not found", d.Seq)
	}
	delete(r.m.dead, d.Seq)
	d.Deliveries = 0
	r.m.pending = append(r.m.pending, d.SortedValue)
}

func (r *modelRun) purge() {
	d, ok := r.anyDead()
	if !ok {
		return
	}
	got, ok := r.s.RemoveDead(d.Seq)
	if !ok || !sameValue(got.SortedValue, d.SortedValue) || got.Reason != d.Reason {
		r.fatalf("RemoveDead %d: %+v %v, want %+v", d.Seq, got, ok, d)
	}
	delete(r.m.dead, d.Seq)
}

// kill moves a pending value to the dead set, as a pull does with one
// that had MaxDeliveries.
func (r *modelRun) kill() {
	if len(r.m.pending) == 0 {
		return
	}
	i := r.rng.IntN(len(r.m.pending))
	v := r.m.pending[i]
	if !r.s.KillPending(index.SortedValue{Key: v.Key, Sort: v.Sort, Seq: v.Seq}, "limit") {
		r.fatalf("KillPending %+v: not found", v)
	}
	r.m.pending = slices.Delete(r.m.pending, i, i+1)
	r.m.dead[v.Seq] = index.DeadValue{SortedValue: v, Reason: "limit"}
}

// anyValue returns a pending or dead value of the model, or one that is
// leased (which Drop and MoveValue must not find).
func (r *modelRun) anyValue() (v index.SortedValue, leased, ok bool) {
	var all []index.SortedValue
	var isLeased []bool
	r.m.all(func(v *index.SortedValue) { all = append(all, *v) })
	for _, b := range r.m.batches {
		for range b.Values {
			isLeased = append(isLeased, true)
		}
	}
	if len(all) == 0 {
		return v, false, false
	}
	i := r.rng.IntN(len(all))
	return all[i], i >= len(r.m.pending) && i < len(r.m.pending)+len(isLeased), true
}

func (r *modelRun) drop() {
	v, leased, ok := r.anyValue()
	if !ok {
		return
	}
	if got := r.s.Drop(v); got == leased {
		r.fatalf("Drop of %+v (leased %v): %v", v, leased, got)
	}
	if leased {
		return
	}
	r.m.pending = slices.DeleteFunc(r.m.pending, func(p index.SortedValue) bool { return p.Seq == v.Seq })
	delete(r.m.dead, v.Seq)
}

func (r *modelRun) move() {
	v, leased, ok := r.anyValue()
	if !ok {
		return
	}
	loc, size := r.next(), uint32(r.rng.IntN(100)+1)
	if r.s.HasValue(v) == leased || r.s.HasValueAt(v) == leased {
		r.fatalf("HasValue of %+v (leased %v)", v, leased)
	}
	if got := r.s.MoveValue(v, loc, size); got == leased {
		r.fatalf("MoveValue of %+v (leased %v): %v", v, leased, got)
	}
	if leased {
		r.moveLeased(v, loc, size)
		return
	}
	r.m.all(func(p *index.SortedValue) {
		if p.Seq == v.Seq {
			p.Loc, p.Size = loc, size
		}
	})
}

// moveLeased moves the leased value v, as a compaction copies it forward.
func (r *modelRun) moveLeased(v index.SortedValue, loc uint64, size uint32) {
	for lease, b := range r.m.batches {
		for i := range b.Values {
			if b.Values[i].Seq != v.Seq {
				continue
			}
			if got, ok := r.s.LeasedValue(lease, v.Seq); !ok || !sameValue(got, v) {
				r.fatalf("LeasedValue(%d, %d): %+v %v, want %+v", lease, v.Seq, got, ok, v)
			}
			if r.s.MoveLeased(lease+1, v.Seq, loc, size) { // no other batch holds it
				r.fatalf("MoveLeased found value %d in batch %d, which does not hold it", v.Seq, lease+1)
			}
			if !r.s.MoveLeased(lease, v.Seq, loc, size) {
				r.fatalf("MoveLeased(%d, %d): not found", lease, v.Seq)
			}
			b.Values[i].Loc, b.Values[i].Size = loc, size
			return
		}
	}
	r.fatalf("leased value %d in no batch of the model", v.Seq)
}

// retake leases again some of a key's pending values, and some Seqs that
// are not its pending values.
func (r *modelRun) retake() {
	if len(r.m.pending) == 0 {
		return
	}
	key := r.m.pending[r.rng.IntN(len(r.m.pending))].Key
	var seqs []uint64
	for _, v := range r.m.keyValues(key) {
		if r.rng.IntN(2) == 0 {
			seqs = append(seqs, v.Seq)
		}
	}
	seqs = append(seqs, r.lsn+1)
	slices.Sort(seqs)
	lease := r.next()
	got, ok := r.s.Retake(key, seqs, lease, r.now, r.now+5)
	want, wantOK := r.m.retake(key, seqs, lease, r.now, r.now+5)
	if ok != wantOK {
		r.fatalf("Retake %q %v: %v, want %v", key, seqs, ok, wantOK)
	}
	r.requireBatch(got, want, "Retake")
}

// narrow keeps some values of a leased batch leased and puts the others
// back, as a salvaging replay does before a settle that names values.
func (r *modelRun) narrow() {
	b, ok := r.anyBatch()
	if !ok {
		return
	}
	var seqs []uint64
	var kept, back []index.SortedValue
	for _, v := range b.Values {
		if r.rng.IntN(2) == 0 {
			seqs = append(seqs, v.Seq)
			kept = append(kept, v)
		} else {
			back = append(back, v)
		}
	}
	slices.Sort(seqs)
	if got := r.s.Narrow(b.Lease, seqs); got != len(back) {
		r.fatalf("Narrow(%d, %v): %d put back, want %d", b.Lease, seqs, got, len(back))
	}
	b.Values = kept
	r.m.batches[b.Lease] = b
	r.m.pending = append(r.m.pending, back...)
}

// check compares s with the model.
func (r *modelRun) check(s *index.Sorted, what string) {
	r.t.Helper()
	m := r.m
	wantCounts := index.SortedCounts{Pending: len(m.pending), Keys: len(m.pullable()), Batches: len(m.batches), Dead: len(m.dead)}
	var bytes int64
	minLoc, any := uint64(0), false
	m.all(func(v *index.SortedValue) {
		bytes += int64(v.Size)
		if !any || v.Loc < minLoc {
			minLoc, any = v.Loc, true
		}
	})
	for _, b := range m.batches {
		wantCounts.Leased += len(b.Values)
	}
	if got := s.Counts(); got != wantCounts {
		r.fatalf("%s: Counts %+v, want %+v", what, got, wantCounts)
	}
	if got := s.Bytes(); got != bytes {
		r.fatalf("%s: Bytes %d, want %d", what, got, bytes)
	}
	if loc, ok := s.MinLoc(); ok != any || loc != minLoc {
		r.fatalf("%s: MinLoc %d %v, want %d %v", what, loc, ok, minLoc, any)
	}
	r.checkTimes(s, what)
	if what != "index" || r.rng.IntN(3) == 0 { // let changes pile up between reads, too
		r.checkPublished(s, what)
	}
	if key, _, ok := s.Next(); ok != (wantCounts.Keys > 0) || ok && key != m.pullable()[0] {
		r.fatalf("%s: Next %q %v, want %q", what, key, ok, m.pullable())
	}
	if r.step%50 == 0 {
		got, want := viewOf(s.Snapshot()), m.view()
		if diff := got.diff(want); diff != "" {
			r.fatalf("%s: snapshot: %s", what, diff)
		}
	}
}

// checkPublished compares MinPublishedAt with the earliest At of the
// model's pending and leased values.
func (r *modelRun) checkPublished(s *index.Sorted, what string) {
	r.t.Helper()
	want, any := int64(0), false
	each := func(vs []index.SortedValue) {
		for _, v := range vs {
			if !any || v.At < want {
				want, any = v.At, true
			}
		}
	}
	each(r.m.pending)
	for _, b := range r.m.batches {
		each(b.Values)
	}
	if at, ok := s.MinPublishedAt(); ok != any || at != want {
		r.fatalf("%s: MinPublishedAt %d %v, want %d %v", what, at, ok, want, any)
	}
}

func (r *modelRun) checkTimes(s *index.Sorted, what string) {
	r.t.Helper()
	var deadline int64
	anyBatch := false
	for _, b := range r.m.batches {
		if !anyBatch || b.Due < deadline {
			deadline, anyBatch = b.Due, true
		}
	}
	if at, ok := s.NextDeadline(); ok != anyBatch || at != deadline {
		r.fatalf("%s: NextDeadline %d %v, want %d %v", what, at, ok, deadline, anyBatch)
	}
	var hold int64
	anyHold := false
	r.m.endHolds()
	for _, at := range r.m.held {
		if at <= r.m.now {
			continue // NextHold says when a key comes back; this one is back
		}
		if !anyHold || at < hold {
			hold, anyHold = at, true
		}
	}
	if at, ok := s.NextHold(); ok != anyHold || at != hold {
		r.fatalf("%s: NextHold %d %v, want %d %v", what, at, ok, hold, anyHold)
	}
}

// checkFrozen requires every snapshot taken on the way to read as it did
// when it was taken.
func (r *modelRun) checkFrozen() {
	for i, f := range r.frozen {
		if diff := viewOf(f.snap).diff(f.want); diff != "" {
			r.t.Fatalf("snapshot %d changed after it was taken: %s", i, diff)
		}
	}
}

// restore builds an index from a snapshot as a queue loads one, and
// judges its holds by the time now, as the queue's first pull does.
func restore(snap *index.SortedSnapshot, single bool, now int64) *index.Sorted {
	s := index.NewSorted(single)
	snap.Pending(func(v index.SortedValue) bool { s.Publish(v); return true })
	snap.Dead(func(d index.DeadValue) bool { s.PutDead(d); return true })
	snap.Batches(func(b index.Batch) bool { s.PutBatch(b); return true })
	snap.Holds(func(key string, at int64) bool { s.Hold(key, at); return true })
	s.Release(now)
	return s
}

// snapView is what a snapshot lists, in a canonical order.
type snapView struct {
	pending []index.SortedValue
	dead    []index.DeadValue
	batches []index.Batch
	holds   map[string]int64
}

func viewOf(snap *index.SortedSnapshot) snapView {
	v := snapView{holds: map[string]int64{}}
	snap.Pending(func(p index.SortedValue) bool { v.pending = append(v.pending, p); return true })
	snap.Dead(func(d index.DeadValue) bool { v.dead = append(v.dead, d); return true })
	snap.Batches(func(b index.Batch) bool { v.batches = append(v.batches, b); return true })
	snap.Holds(func(key string, at int64) bool { v.holds[key] = at; return true })
	return v
}

func (m *sortedModel) view() snapView {
	m.endHolds()
	v := snapView{holds: maps.Clone(m.held)}
	v.pending = slices.Clone(m.pending)
	slices.SortFunc(v.pending, func(a, b index.SortedValue) int { return cmp.Or(strings.Compare(a.Key, b.Key), cmpValue(a, b)) })
	for _, seq := range slices.Sorted(maps.Keys(m.dead)) {
		v.dead = append(v.dead, m.dead[seq])
	}
	for _, lease := range slices.Sorted(maps.Keys(m.batches)) {
		b := m.batches[lease]
		b.Values = slices.Clone(b.Values)
		v.batches = append(v.batches, b)
	}
	return v
}

func (v snapView) diff(want snapView) string {
	switch {
	case !slices.EqualFunc(v.pending, want.pending, sameValue):
		return fmt.Sprintf("pending\n%v\nwant\n%v", v.pending, want.pending)
	case !slices.EqualFunc(v.dead, want.dead, func(a, b index.DeadValue) bool {
		return sameValue(a.SortedValue, b.SortedValue) && a.Reason == b.Reason
	}):
		return fmt.Sprintf("dead\n%v\nwant\n%v", v.dead, want.dead)
	case !slices.EqualFunc(v.batches, want.batches, sameBatch):
		return fmt.Sprintf("batches\n%v\nwant\n%v", v.batches, want.batches)
	case !maps.Equal(v.holds, want.holds):
		return fmt.Sprintf("holds %v, want %v", v.holds, want.holds)
	}
	return ""
}

// sameValue compares values with a nil sort key equal to an empty one.
func sameValue(a, b index.SortedValue) bool {
	return a.Key == b.Key && bytes.Equal(a.Sort, b.Sort) && a.Seq == b.Seq && a.Loc == b.Loc && a.At == b.At &&
		a.Size == b.Size && a.Deliveries == b.Deliveries
}

func sameBatch(a, b index.Batch) bool {
	return a.Lease == b.Lease && a.Key == b.Key && a.Due == b.Due && a.At == b.At &&
		slices.EqualFunc(a.Values, b.Values, sameValue)
}

func describeBatch(b index.Batch) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "lease %d key %.12q due %d at %d:", b.Lease, b.Key, b.Due, b.At)
	for _, v := range b.Values {
		fmt.Fprintf(&sb, " [%x seq %d loc %d size %d n %d]", v.Sort, v.Seq, v.Loc, v.Size, v.Deliveries)
	}
	return sb.String()
}
