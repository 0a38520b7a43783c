package index

import (
	"slices"
	"strings"

	"github.com/google/btree"
)

// MoveValue changes the Loc and Size of the pending or dead value v (found
// by Key, Sort and Seq) and reports whether it found it.
func (s *Sorted) MoveValue(v SortedValue, loc uint64, size uint32) bool {
	if k, ci, i, ok := s.findPending(v); ok {
		was := k
		cur := k.own(ci, i, s.gen)
		s.locs.remove(cur.loc)
		s.locs.add(loc)
		s.bytes += int64(size) - int64(cur.size)
		cur.loc, cur.size = loc, size
		s.keep(k, was)
		return true
	}
	if cur, ok := s.dead.Get(DeadValue{SortedValue: SortedValue{Seq: v.Seq}}); ok {
		s.locs.remove(cur.Loc)
		s.locs.add(loc)
		s.bytes += int64(size) - int64(cur.Size)
		cur.Loc, cur.Size = loc, size
		s.dead.ReplaceOrInsert(cur)
		return true
	}
	return false
}

// LeasedValue returns the value seq of the leased batch lease.
func (s *Sorted) LeasedValue(lease, seq uint64) (SortedValue, bool) {
	b, ok := s.batches.Get(Batch{Lease: lease})
	if !ok {
		return SortedValue{}, false
	}
	for _, v := range b.Values {
		if v.Seq == seq {
			return v, true
		}
	}
	return SortedValue{}, false
}

// MoveLeased changes the Loc and Size of the value seq of the leased batch
// lease and reports whether it found it. The batch's values are copied,
// not changed in place: snapshots and the callers of Batch and Take share
// them.
func (s *Sorted) MoveLeased(lease, seq, loc uint64, size uint32) bool {
	b, ok := s.batches.Get(Batch{Lease: lease})
	if !ok {
		return false
	}
	i := slices.IndexFunc(b.Values, func(v SortedValue) bool { return v.Seq == seq })
	if i < 0 {
		return false
	}
	b.Values = slices.Clone(b.Values)
	v := &b.Values[i]
	s.locs.remove(v.Loc)
	s.locs.add(loc)
	s.bytes += int64(size) - int64(v.Size)
	v.Loc, v.Size = loc, size
	s.batches.ReplaceOrInsert(b)
	return true
}

// DropLeased removes the value seq of the leased batch lease for good and
// reports whether it found it. The batch keeps its other values, its
// lease and its deadline; a batch left with no value goes, as an ack
// takes it. The batch's values are copied, not changed in place (see
// MoveLeased).
func (s *Sorted) DropLeased(lease, seq uint64) bool {
	b, ok := s.batches.Get(Batch{Lease: lease})
	if !ok {
		return false
	}
	i := slices.IndexFunc(b.Values, func(v SortedValue) bool { return v.Seq == seq })
	if i < 0 {
		return false
	}
	v := b.Values[i]
	if len(b.Values) == 1 {
		s.removeBatch(lease)
		s.place(b.Key)
	} else {
		s.ageBatch(b, false)
		b.Values = slices.Delete(slices.Clone(b.Values), i, i+1)
		s.batches.ReplaceOrInsert(b)
		s.ageBatch(b, true)
		s.leased--
	}
	s.uncache(v.Seq)
	s.bytes -= int64(v.Size)
	s.locs.remove(v.Loc)
	return true
}

// Batches calls fn for every leased batch, by lease, until fn returns
// false. A batch's values are shared: fn must not change them.
func (s *Sorted) Batches(fn func(Batch) bool) { s.batches.Ascend(fn) }

// findPending returns the key and position of the pending value v (found
// by Key, Sort and Seq).
func (s *Sorted) findPending(v SortedValue) (keyRef, int, int, bool) {
	k, ok := s.key(v.Key)
	if !ok {
		return k, 0, 0, false
	}
	ci, i, ok := k.find(sortString(v.Sort), v.Seq)
	return k, ci, i, ok
}

// Dead calls fn for every dead value in Seq order until fn returns false.
func (s *Sorted) Dead(fn func(DeadValue) bool) { s.dead.Ascend(fn) }

// DeadFrom is Dead starting at the first value whose Seq is at least from.
func (s *Sorted) DeadFrom(from uint64, fn func(DeadValue) bool) {
	s.dead.AscendGreaterOrEqual(DeadValue{SortedValue: SortedValue{Seq: from}}, fn)
}

// RemoveDead removes a dead value.
func (s *Sorted) RemoveDead(seq uint64) (DeadValue, bool) {
	v, ok := s.dead.Delete(DeadValue{SortedValue: SortedValue{Seq: seq}})
	if ok {
		s.bytes -= int64(v.Size)
		s.locs.remove(v.Loc)
	}
	return v, ok
}

// Revive puts a dead value back among the pending ones with its delivery
// count reset.
func (s *Sorted) Revive(seq uint64) bool {
	d, ok := s.RemoveDead(seq)
	if ok {
		d.Deliveries = 0
		s.Publish(d.SortedValue)
	}
	return ok
}

// PutDead adds a dead value (used when loading a snapshot).
func (s *Sorted) PutDead(v DeadValue) {
	if old, ok := s.dead.ReplaceOrInsert(v); ok {
		s.bytes -= int64(old.Size)
		s.locs.remove(old.Loc)
	}
	s.bytes += int64(v.Size)
	s.locs.add(v.Loc)
}

// PutBatch adds a leased batch (used when loading a snapshot).
func (s *Sorted) PutBatch(b Batch) {
	s.unplace(b.Key)
	s.putBatch(b, false)
	for _, v := range b.Values {
		s.bytes += int64(v.Size)
		s.locs.add(v.Loc)
	}
	s.place(b.Key)
}

// MinLoc returns the lowest Loc of any value: the oldest log position the
// index still needs. O(log n).
func (s *Sorted) MinLoc() (uint64, bool) { return s.locs.min() }

// Values calls fn for every pending and dead value, in no particular order,
// until fn returns false.
func (s *Sorted) Values(fn func(SortedValue) bool) {
	more := true
	s.keys.each(func(kv *keyValues) bool {
		k := s.ref(kv)
		more = k.each(func(p *pendingValue) bool { return fn(p.value(k.name)) })
		return more
	})
	if !more {
		return
	}
	s.dead.Ascend(func(d DeadValue) bool { return fn(d.SortedValue) })
}

// Snapshot returns a frozen copy-on-write view of the index. It costs a
// keySnapshot per key (the value itself for a key with one value): the
// keys' lists and chunks are shared with the index, which copies one
// before changing it.
func (s *Sorted) Snapshot() *SortedSnapshot {
	snap := &SortedSnapshot{
		pending: make([]keySnapshot, 0, s.keys.n), count: s.pending,
		dead: s.dead.Clone(), batches: s.batches.Clone(), holds: s.holds.Clone(),
	}
	s.keys.each(func(kv *keyValues) bool {
		snap.pending = append(snap.pending, s.ref(kv).snapshot())
		return true
	})
	s.gen++
	return snap
}

// keySnapshot is a key's pending values as a snapshot sees them.
type keySnapshot struct {
	name   string
	one    pendingValue  // the key's first value
	two    *pendingValue // the second, without chunks; shared with the index, never changed
	chunks []*chunk      // the values after it; shared with the index, never changed after the snapshot
}

// each calls fn for every value in order until fn returns false; it
// reports whether it went through them all.
func (k *keySnapshot) each(fn func(*pendingValue) bool) bool {
	return fn(&k.one) && (k.two == nil || fn(k.two)) && eachValue(k.chunks, fn)
}

// SortedSnapshot is a frozen view of a Sorted index.
type SortedSnapshot struct {
	pending []keySnapshot            // in no order until Pending sorts them by key
	count   int                      // pending values
	dead    *btree.BTreeG[DeadValue] // clones; never mutated
	batches *btree.BTreeG[Batch]
	holds   *btree.BTreeG[hold]
}

// Len returns the number of pending values, dead values, batches and holds.
func (s *SortedSnapshot) Len() (pending, dead, batches, holds int) {
	return s.count, s.dead.Len(), s.batches.Len(), s.holds.Len()
}

// Pending calls fn for every pending value, by key, sort key and Seq,
// until it returns false. It is not safe for concurrent use.
func (s *SortedSnapshot) Pending(fn func(SortedValue) bool) {
	slices.SortFunc(s.pending, func(a, b keySnapshot) int { return strings.Compare(a.name, b.name) })
	for i := range s.pending {
		k := &s.pending[i]
		if !k.each(func(p *pendingValue) bool { return fn(p.value(k.name)) }) {
			return
		}
	}
}

// Dead calls fn for every dead value until it returns false.
func (s *SortedSnapshot) Dead(fn func(DeadValue) bool) { s.dead.Ascend(fn) }

// Batches calls fn for every leased batch until it returns false.
func (s *SortedSnapshot) Batches(fn func(Batch) bool) { s.batches.Ascend(fn) }

// Holds calls fn for every held key and its hold time until it returns false.
func (s *SortedSnapshot) Holds(fn func(key string, at int64) bool) {
	s.holds.Ascend(func(h hold) bool { return fn(h.key, h.at) })
}

// HasPending reports whether key has pending values.
func (s *Sorted) HasPending(key string) bool {
	return s.keys.get(key) != nil
}

// HasValueAt reports whether the value v is still pending or dead with the
// same Loc.
func (s *Sorted) HasValueAt(v SortedValue) bool {
	if k, ci, i, ok := s.findPending(v); ok {
		return k.at(ci, i).loc == v.Loc
	}
	cur, ok := s.dead.Get(DeadValue{SortedValue: SortedValue{Seq: v.Seq}})
	return ok && cur.Loc == v.Loc
}

// removePending takes the pending value at (ci, i) of k out of the key,
// the pending count and the payload cache, and returns it; the key's place
// in the pull order follows its new first value (or it leaves the order).
func (s *Sorted) removePending(k keyRef, ci, i int) pendingValue {
	s.unplace(k.name)
	if k.list == nil { // the values its entry points into change
		s.unage(k)
	}
	was := k
	cur, empty := k.removeAt(ci, i, s.gen)
	s.keep(k, was)
	s.pending--
	switch {
	case empty:
		s.removeKey(k)
	case k.list == nil:
		s.addAge(k.age().at)
	case k.list.n == 0: // the key is back to one value
		s.unage(k)
		delete(s.lists, k.keyValues)
		s.addAge(k.one.at)
	case cur.timeKey == k.list.oldest:
		s.stale[k.keyValues] = struct{}{} // see sorted_age.go
	}
	s.uncache(cur.seq)
	s.place(k.name)
	return cur
}

// Drop removes a pending or dead value for good.
func (s *Sorted) Drop(v SortedValue) bool {
	if k, ci, i, ok := s.findPending(v); ok {
		cur := s.removePending(k, ci, i)
		s.bytes -= int64(cur.size)
		s.locs.remove(cur.loc)
		return true
	}
	_, ok := s.RemoveDead(v.Seq)
	return ok
}
