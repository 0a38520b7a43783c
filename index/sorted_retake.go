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
