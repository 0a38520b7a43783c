package index

import "slices"

// Retake leases again, as one batch with the given lease, the pending
// values of key whose Seq is in seqs (ascending), as Take leased them: a
// salvaging replay uses it to settle a batch whose pull record was lost,
// from the Seqs its settle record names. The key's other pending values
// stay pending. It reports false, changing nothing, when none of seqs is
// a pending value of key.
func (s *Sorted) Retake(key string, seqs []uint64, lease uint64, at, due int64) (Batch, bool) {
	k, ok := s.key(key)
	if !ok {
		return Batch{}, false
	}
	var vs []SortedValue
	k.each(func(p *pendingValue) bool {
		if _, found := slices.BinarySearch(seqs, p.seq); found {
			vs = append(vs, p.value(k.name))
		}
		return true
	})
	if len(vs) == 0 {
		return Batch{}, false
	}
	b := Batch{Lease: lease, Key: k.name, Due: due, At: at, Values: vs}
	for i := range vs {
		s.Drop(vs[i])
		vs[i].Deliveries++
	}
	s.PutBatch(b)
	return b, true
}

// Narrow puts back among the pending values, at their sort keys, the
// values of the leased batch lease whose Seq is not in seqs (ascending),
// and returns how many it put back. A salvaging replay uses it before a
// settle that names its batch's values: when damage took the pull of an
// earlier batch of the same key, the replayed pull of this one took that
// batch's values too, which this settle must not settle.
func (s *Sorted) Narrow(lease uint64, seqs []uint64) int {
	b, ok := s.batches.Get(Batch{Lease: lease})
	if !ok {
		return 0
	}
	var kept, back []SortedValue
	for _, v := range b.Values {
		if _, found := slices.BinarySearch(seqs, v.Seq); found {
			kept = append(kept, v)
		} else {
			back = append(back, v)
		}
	}
	if len(back) == 0 {
		return 0
	}
	b.Values = kept
	s.batches.ReplaceOrInsert(b)
	s.leased -= len(back)
	for _, v := range back {
		s.addPending(v)
	}
	return len(back)
}
