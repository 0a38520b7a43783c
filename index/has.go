package index

// HasValue reports whether the value v, found by Key, Sort and Seq, is
// pending or dead: what MoveValue and Drop find.
func (s *Sorted) HasValue(v SortedValue) bool {
	_, _, _, ok := s.findPending(v)
	return ok || s.HasDead(v.Seq)
}

// HasDead reports whether the value seq is in the dead set: what Revive
// and RemoveDead find.
func (s *Sorted) HasDead(seq uint64) bool {
	return s.dead.Has(DeadValue{SortedValue: SortedValue{Seq: seq}})
}
