package index

// A sorted index answers MinPublishedAt from its keys and batches, not
// from every value: a pending value costs nothing more for it.
//
// Each key with pending values has one entry in Sorted.ages, a pointer to
// the (At, Seq) of its earliest value: its one value's own, the older of
// its two values', or its list's oldest. The pointed-to pair must not
// change while it is in the set (the set is ordered by it): the entry is
// taken out before and put back after.
//
// A list's oldest may lag: when the value it names leaves, the key goes
// into Sorted.stale instead of scanning its values at once, so that
// removing a key's values one by one (dead-lettering each past its limit,
// a salvaging replay's drops) costs one scan, not one per value. A lagging
// oldest is never after the key's true earliest, and MinPublishedAt brings
// the stale keys up to date before it reads the set.
//
// Each leased batch with values has one entry in Sorted.batchAges: the
// earliest (At, Seq) of its values.

// cmpAges orders the entries of Sorted.ages by (at, seq).
func cmpAges(a, b *timeKey) int {
	switch {
	case lessTimeKey(*a, *b):
		return -1
	case lessTimeKey(*b, *a):
		return 1
	}
	return 0
}

// age returns the key's entry in Sorted.ages.
func (k keyRef) age() *timeKey {
	switch {
	case k.list != nil:
		return &k.list.oldest
	case k.two != nil && lessTimeKey(k.two.timeKey, k.one.timeKey):
		return &k.two.timeKey
	}
	return &k.one.timeKey
}

// oldest returns the earliest (at, seq) of the key's values.
func (k keyRef) oldest() timeKey {
	o := k.one.timeKey
	k.each(func(p *pendingValue) bool {
		if lessTimeKey(p.timeKey, o) {
			o = p.timeKey
		}
		return true
	})
	return o
}

// unage takes the key out of Sorted.ages, before its entry changes or the
// key goes.
func (s *Sorted) unage(k keyRef) {
	s.ages.Delete(k.age())
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
	s.ages.ReplaceOrInsert(k.age())
}

// refreshAges brings the oldest of every stale key up to date.
func (s *Sorted) refreshAges() {
	for kv := range s.stale {
		k := keyRef{keyValues: kv, list: s.lists[kv]}
		s.ages.Delete(&k.list.oldest)
		k.list.oldest = k.oldest()
		s.ages.ReplaceOrInsert(&k.list.oldest)
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

// ageBatch puts or takes b's entry in Sorted.batchAges.
func (s *Sorted) ageBatch(b Batch, put bool) {
	o, ok := batchOldest(b)
	switch {
	case !ok:
	case put:
		s.batchAges.ReplaceOrInsert(o)
	default:
		s.batchAges.Delete(o)
	}
}

// MinPublishedAt returns the earliest At of any pending or leased value,
// dead values left out: the publish time of the oldest value not yet
// acked. O(log n), after a scan of each key whose earliest value left
// since the last call.
func (s *Sorted) MinPublishedAt() (int64, bool) {
	s.refreshAges()
	k, ok := s.ages.Min()
	b, bok := s.batchAges.Min()
	switch {
	case ok && (!bok || k.at < b.at):
		return k.at, true
	case bok:
		return b.at, true
	}
	return 0, false
}

// liveKey is v's (At, Seq).
func liveKey(v SortedValue) timeKey { return timeKey{v.At, v.Seq} }
