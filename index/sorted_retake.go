package index

import "slices"

// Retake leases again, as one batch with the given lease, the values of
// key whose Seq is in seqs (ascending), as Take leased them: a salvaging
// replay uses it to settle a batch whose pull record was lost, from the
// Seqs its settle record names. A named value still pending is delivered
// once more (Deliveries); one held by another leased batch of key is taken
// out of it as it is: without single flight, the replayed pull of a later
// batch took it, as it was pending for want of the lost pull. The key's
// other values stay where they are. It reports false, changing nothing,
// when none of seqs is a pending or leased value of key.
func (s *Sorted) Retake(key string, seqs []uint64, lease uint64, at, due int64) (Batch, bool) {
	vs := s.retakePending(key, seqs)
	if len(vs) < len(seqs) {
		vs = append(vs, s.retakeLeased(key, seqs, lease)...)
	}
	if len(vs) == 0 {
		return Batch{}, false
	}
	slices.SortFunc(vs, func(a, b SortedValue) int {
		switch {
		case lessValue(a, b):
			return -1
		case lessValue(b, a):
			return 1
		}
		return 0
	})
	b := Batch{Lease: lease, Key: key, Due: due, At: at, Values: vs}
	s.PutBatch(b)
	return b, true
}

// retakePending removes the pending values of key named by seqs and
// returns them, each delivered once more.
func (s *Sorted) retakePending(key string, seqs []uint64) []SortedValue {
	k, ok := s.key(key)
	if !ok {
		return nil
	}
	var vs []SortedValue
	k.each(func(p *pendingValue) bool {
		if _, found := slices.BinarySearch(seqs, p.seq); found {
			vs = append(vs, p.value(k.name))
		}
		return true
	})
	for i := range vs {
		s.Drop(vs[i])
		vs[i].Deliveries++
	}
	return vs
}

// retakeLeased removes the values named by seqs from the leased batches
// of key other than lease, and returns them. The batches stay, with what
// is left, for their own records; the values are counted again by the
// PutBatch that follows.
func (s *Sorted) retakeLeased(key string, seqs []uint64, lease uint64) []SortedValue {
	if s.inflight[key] == 0 {
		return nil
	}
	var from []Batch
	s.batches.Ascend(func(b Batch) bool {
		if b.Key == key && b.Lease != lease && slices.ContainsFunc(b.Values, func(v SortedValue) bool {
			_, found := slices.BinarySearch(seqs, v.Seq)
			return found
		}) {
			from = append(from, b)
		}
		return true
	})
	var vs []SortedValue
	for _, b := range from {
		s.ageBatch(b, false)
		var kept []SortedValue
		for _, v := range b.Values {
			if _, found := slices.BinarySearch(seqs, v.Seq); !found {
				kept = append(kept, v)
				continue
			}
			vs = append(vs, v)
			s.leased--
			s.bytes -= int64(v.Size)
			s.locs.remove(v.Loc)
		}
		b.Values = kept
		s.batches.ReplaceOrInsert(b)
		s.ageBatch(b, true)
	}
	return vs
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
	s.ageBatch(b, false)
	b.Values = kept
	s.batches.ReplaceOrInsert(b)
	s.ageBatch(b, true)
	s.leased -= len(back)
	for _, v := range back {
		s.addPending(v)
	}
	return len(back)
}
