package index

// HasPendingValue reports whether the value v, found by Key, Sort and
// Seq, is pending: what KillPending finds.
func (s *Sorted) HasPendingValue(v SortedValue) bool {
	_, _, _, ok := s.findPending(v)
	return ok
}

// PendingOf calls fn for every pending value of key, in sort order, until
// fn returns false.
func (s *Sorted) PendingOf(key string, fn func(SortedValue) bool) {
	if k, ok := s.key(key); ok {
		k.each(func(p *pendingValue) bool { return fn(p.value(k.name)) })
	}
}

// KillPending moves the pending value v (found by Key, Sort and Seq) to
// the dead set with reason, keeping its delivery count, and reports
// whether it found it. The key keeps its other pending values, and its
// place in the pull order follows its new first value.
func (s *Sorted) KillPending(v SortedValue, reason string) bool {
	k, ci, i, ok := s.findPending(v)
	if !ok {
		return false
	}
	cur := s.removePending(k, ci, i)
	s.dead.ReplaceOrInsert(DeadValue{cur.value(k.name), reason})
	return true
}
