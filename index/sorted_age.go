package index

// A sorted index answers MinPublishedAt from its keys and batches, not
// from every value: a pending value costs nothing more for it.
//
// Sorted.ages holds one publish time (At) for each key with pending values
// and each leased batch with values: the At of the key's earliest (At,
// Seq) (its one value's own, the older of its two values', or its list's
// oldest), or of the batch's earliest value. It holds plain numbers, not
// pointers, so that the collector does not scan it and comparing two
// entries reads no other memory. Entries with equal At are alike: the set
// holds each At once and Sorted.ageDups counts the copies beyond the
// first. A key's or batch's entry is taken out (by its At) before what
// gives it changes and put back after.
//
// A list's oldest may lag: when the value it names leaves, the key goes
// into Sorted.stale instead of looking for the next at once, so that
// removing a key's values one by one (dead-lettering each past its limit,
// a salvaging replay's drops) costs one look, not one per value. The look
// reads each chunk's own oldest (kept by the list as values come and go:
// a scan of one chunk's at most chunkMax values when its oldest leaves),
// not every value. A lagging
// oldest is never after the key's true earliest, and MinPublishedAt brings
// the stale keys up to date before it reads the set.

// addAge puts one entry with publish time at in Sorted.ages.
func (s *Sorted) addAge(at int64) {
	if s.ages.ReplaceOrInsert(at) {
		s.ageDups[at]++
	}
}

// removeAge takes one entry with publish time at out of Sorted.ages.
func (s *Sorted) removeAge(at int64) {
	if len(s.ageDups) > 0 {
		if n, ok := s.ageDups[at]; ok {
			if n == 1 {
				delete(s.ageDups, at)
			} else {
				s.ageDups[at] = n - 1
			}
			return
		}
	}
	s.ages.Delete(at)
}

// age returns the (at, seq) that gives the key its entry in Sorted.ages.
func (k keyRef) age() timeKey {
	switch {
	case k.list != nil:
		return k.list.oldest
	case k.two != nil && lessTimeKey(k.two.timeKey, k.one.timeKey):
		return k.two.timeKey
	}
	return k.one.timeKey
}

// oldest returns the earliest (at, seq) of the key's values: a look at
// its first value and at each chunk of its list (O(values/chunkMax) for
// a list filled in order), not at every value.
func (k keyRef) oldest() timeKey {
	o := k.one.timeKey
	var t timeKey
	switch {
	case k.list != nil && k.list.n > 0:
		t = k.list.earliest()
	case k.two != nil:
		t = k.two.timeKey
	default:
		return o
	}
	if lessTimeKey(t, o) {
		o = t
	}
	return o
}

// unage takes the key out of Sorted.ages, before its entry changes or the
// key goes.
func (s *Sorted) unage(k keyRef) {
	s.removeAge(k.age().at)
	if len(s.stale) > 0 {
		delete(s.stale, k.keyValues)
	}
}

// agePending keeps the key's entry right after insert put p in it, old
// being the value p replaced, if any (replaced). With out, the key had no
// list and its entry, which insert may have overwritten, was taken out of
// the set before (see addPending).
func (s *Sorted) agePending(k keyRef, out bool, p, old pendingValue, replaced bool) {
	switch {
	case out && k.list != nil: // a second value: the key's entry moves to its new list
		k.list.oldest = k.oldest()
	case out:
	case lessTimeKey(p.timeKey, k.list.oldest):
		s.unage(k)
		k.list.oldest = p.timeKey
	case replaced && old.timeKey == k.list.oldest && p.timeKey != old.timeKey:
		s.stale[k.keyValues] = struct{}{}
		return
	default:
		return
	}
	s.addAge(k.age().at)
}

// handAge readies the key's entry in Sorted.ages to be the entry of the
// batch that takes all its values, before the key goes, and reports
// whether it stays: the batch's earliest value is the key's, so its At is
// the same, unless the key's oldest lags (then the entry is taken out).
func (s *Sorted) handAge(k keyRef) bool {
	if len(s.stale) > 0 {
		if _, lag := s.stale[k.keyValues]; lag {
			s.unage(k)
			return false
		}
	}
	return true
}

// refreshAges brings the oldest of every stale key up to date.
func (s *Sorted) refreshAges() {
	for kv := range s.stale {
		k := keyRef{keyValues: kv, list: s.lists[kv]}
		s.removeAge(k.list.oldest.at)
		k.list.oldest = k.oldest()
		s.addAge(k.list.oldest.at)
	}
	clear(s.stale)
}

// batchOldest returns the earliest (at, seq) of b's values.
func batchOldest(b Batch) (timeKey, bool) {
	var o timeKey
	for i, v := range b.Values {
		if t := liveKey(v); i == 0 || lessTimeKey(t, o) {
			o = t
		}
	}
	return o, len(b.Values) > 0
}

// ageBatch puts or takes b's entry in Sorted.ages.
func (s *Sorted) ageBatch(b Batch, put bool) {
	o, ok := batchOldest(b)
	switch {
	case !ok:
	case put:
		s.addAge(o.at)
	default:
		s.removeAge(o.at)
	}
}

// MinPublishedAt returns the earliest At of any pending or leased value,
// dead values left out: the publish time of the oldest value not yet
// acked. O(log n), after a look at the chunks of each key whose earliest
// value left since the last call (once per such key: the call brings
// them up to date).
func (s *Sorted) MinPublishedAt() (int64, bool) {
	s.refreshAges()
	return s.ages.Min()
}

// liveKey is v's (At, Seq).
func liveKey(v SortedValue) timeKey { return timeKey{v.At, v.Seq} }
