package index

import "github.com/google/btree"

// MoveValue changes the Loc and Size of the pending or dead value v (found
// by Key, Sort and Seq) and reports whether it found it.
func (s *Sorted) MoveValue(v SortedValue, loc uint64, size uint32) bool {
	if cur, ok := s.pending.Get(v); ok {
		s.bytes += int64(size) - int64(cur.Size)
		cur.Loc, cur.Size = loc, size
		s.pending.ReplaceOrInsert(cur)
		return true
	}
	if cur, ok := s.dead.Get(DeadValue{SortedValue: SortedValue{Seq: v.Seq}}); ok {
		s.bytes += int64(size) - int64(cur.Size)
		cur.Loc, cur.Size = loc, size
		s.dead.ReplaceOrInsert(cur)
		return true
	}
	return false
}

// Dead calls fn for every dead value in Seq order until fn returns false.
func (s *Sorted) Dead(fn func(DeadValue) bool) { s.dead.Ascend(fn) }

// RemoveDead removes a dead value.
func (s *Sorted) RemoveDead(seq uint64) (DeadValue, bool) {
	v, ok := s.dead.Delete(DeadValue{SortedValue: SortedValue{Seq: seq}})
	if ok {
		s.bytes -= int64(v.Size)
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
	s.dead.ReplaceOrInsert(v)
	s.bytes += int64(v.Size)
}

// PutBatch adds a leased batch (used when loading a snapshot).
func (s *Sorted) PutBatch(b Batch) {
	s.unplace(b.Key)
	s.putBatch(b)
	for _, v := range b.Values {
		s.bytes += int64(v.Size)
	}
	s.place(b.Key)
}

// MinLoc returns the lowest Loc of any value: the oldest log position the
// index still needs.
func (s *Sorted) MinLoc() (uint64, bool) {
	var min uint64
	found := false
	see := func(v SortedValue) bool {
		if !found || v.Loc < min {
			min, found = v.Loc, true
		}
		return true
	}
	s.pending.Ascend(see)
	s.dead.Ascend(func(d DeadValue) bool { return see(d.SortedValue) })
	s.batches.Ascend(func(b Batch) bool {
		for _, v := range b.Values {
			see(v)
		}
		return true
	})
	return min, found
}

// Values calls fn for every pending and dead value, in no particular order,
// until fn returns false.
func (s *Sorted) Values(fn func(SortedValue) bool) {
	stopped := false
	s.pending.Ascend(func(v SortedValue) bool { stopped = !fn(v); return !stopped })
	if !stopped {
		s.dead.Ascend(func(d DeadValue) bool { return fn(d.SortedValue) })
	}
}

// Snapshot returns a frozen copy-on-write view of the index.
func (s *Sorted) Snapshot() *SortedSnapshot {
	return &SortedSnapshot{
		pending: s.pending.Clone(), dead: s.dead.Clone(),
		batches: s.batches.Clone(), holds: s.holds.Clone(),
	}
}

// SortedSnapshot is a frozen view of a Sorted index.
type SortedSnapshot struct {
	pending *btree.BTreeG[SortedValue] // clones; never mutated
	dead    *btree.BTreeG[DeadValue]
	batches *btree.BTreeG[Batch]
	holds   *btree.BTreeG[hold]
}

// Len returns the number of pending values, dead values, batches and holds.
func (s *SortedSnapshot) Len() (pending, dead, batches, holds int) {
	return s.pending.Len(), s.dead.Len(), s.batches.Len(), s.holds.Len()
}

// Pending calls fn for every pending value until it returns false.
func (s *SortedSnapshot) Pending(fn func(SortedValue) bool) { s.pending.Ascend(fn) }

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
	_, ok := s.firstPending(key)
	return ok
}

// HasValueAt reports whether the value v is still pending or dead with the
// same Loc.
func (s *Sorted) HasValueAt(v SortedValue) bool {
	if cur, ok := s.pending.Get(v); ok {
		return cur.Loc == v.Loc
	}
	cur, ok := s.dead.Get(DeadValue{SortedValue: SortedValue{Seq: v.Seq}})
	return ok && cur.Loc == v.Loc
}

// Drop removes a pending or dead value for good.
func (s *Sorted) Drop(v SortedValue) bool {
	if cur, ok := s.pending.Get(v); ok {
		s.unplace(v.Key)
		s.pending.Delete(cur)
		s.uncache(cur.Seq)
		s.bytes -= int64(cur.Size)
		s.place(v.Key)
		return true
	}
	_, ok := s.RemoveDead(v.Seq)
	return ok
}
