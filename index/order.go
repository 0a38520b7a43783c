package index

// Counts is the number of entries in each state.
type Counts struct {
	Ready, Delayed, Leased, Dead int
}

// Counts returns the number of entries in each state, Delayed entries
// due at the time set last (SetNow) counted as Ready.
func (t *Table) Counts() Counts {
	return Counts{
		Ready:   t.ready.Len() + t.fresh.Len(),
		Delayed: t.delayed.Len(),
		Leased:  t.leases.Len(),
		Dead:    t.dead.Len(),
	}
}

// SetNow sets the time, in unix nanoseconds, that the table judges its
// Delayed entries at: from then on FirstReady and Counts take those whose
// Due is at or before now as ready, and the others as delayed, whatever
// time was set before. A time earlier than the last (a step back of the
// clock) holds back again those whose Due is after it, so that what is
// ready depends on the entries and the time only, never on which times
// were set before: a table rebuilt from the same entries and set to the
// same time answers the same, and an entry put after SetNow is judged by
// its time as one put before. The entries themselves do not change: a due
// entry stays Delayed, with its Due, until a Put changes it. Each entry
// that changes side takes O(log n).
func (t *Table) SetNow(now int64) {
	t.now = now
	for {
		k, ok := t.delayed.Min()
		if !ok || k.at > now {
			break
		}
		t.delayed.Delete(k)
		t.due.ReplaceOrInsert(k)
		t.ready.ReplaceOrInsert(k.seq)
	}
	for {
		k, ok := t.due.Max()
		if !ok || k.at <= now {
			return
		}
		t.due.Delete(k)
		t.ready.Delete(k.seq)
		t.delayed.ReplaceOrInsert(k)
	}
}

// FirstReady returns the entry to deliver first: the lowest Seq of those
// Ready again or Delayed and due at the time set last (SetNow), else the
// lowest Seq of those Undelivered. A due entry is returned as it is, in
// state Delayed.
func (t *Table) FirstReady() (Entry, bool) {
	seq, ok := t.ready.Min()
	if !ok {
		seq, ok = t.fresh.Min()
	}
	if !ok {
		return Entry{}, false
	}
	return t.Get(seq)
}

// NextDue returns the earliest Due among Delayed entries not due at the
// time set last (SetNow).
func (t *Table) NextDue() (int64, bool) {
	k, ok := t.delayed.Min()
	return k.at, ok
}

// NextDeadline returns the earliest lease deadline.
func (t *Table) NextDeadline() (int64, bool) {
	k, ok := t.leases.Min()
	return k.at, ok
}

// Expired returns up to max Leased entries whose deadline is at or before
// now, earliest first.
func (t *Table) Expired(now int64, max int) []Entry {
	var out []Entry
	t.leases.Ascend(func(k timeKey) bool {
		if k.at > now || len(out) >= max {
			return false
		}
		e, _ := t.Get(k.seq)
		out = append(out, e)
		return true
	})
	return out
}

// Leased calls fn for every Leased entry, earliest deadline first, until fn
// returns false.
func (t *Table) Leased(fn func(Entry) bool) {
	t.leases.Ascend(func(k timeKey) bool {
		e, _ := t.Get(k.seq)
		return fn(e)
	})
}

// Dead calls fn for every Dead entry in Seq order, starting at from, until
// fn returns false.
func (t *Table) Dead(from uint64, fn func(Entry) bool) {
	t.dead.AscendGreaterOrEqual(from, func(seq uint64) bool {
		e, _ := t.Get(seq)
		return fn(e)
	})
}

// Ascend calls fn for every entry in Seq order until fn returns false.
func (t *Table) Ascend(fn func(Entry) bool) { t.entries.Ascend(fn) }

// MinLoc returns the lowest Loc of any entry: the oldest log position the
// table still needs. It takes O(log n).
func (t *Table) MinLoc() (uint64, bool) {
	k, ok := t.locs.Min()
	return k.loc, ok
}

// BelowLoc calls fn for every entry whose Loc is below loc, lowest Loc
// first, until fn returns false. It takes O(log n) per entry visited.
func (t *Table) BelowLoc(loc uint64, fn func(Entry) bool) {
	t.locs.AscendLessThan(locKey{loc: loc}, func(k locKey) bool {
		e, _ := t.Get(k.seq)
		return fn(e)
	})
}

// MinEnqueuedAt returns the earliest EnqueuedAt of any entry that is not
// dead. It takes O(log n).
func (t *Table) MinEnqueuedAt() (int64, bool) {
	k, ok := t.enqueued.Min()
	return k.at, ok
}

// Snapshot returns a copy-on-write clone of the entries, to be read while
// the table keeps changing. It takes time in proportion to the span of the
// entries' window (seqs), not to their number.
func (t *Table) Snapshot() *Snapshot {
	return &Snapshot{entries: t.entries.freeze()}
}

// Snapshot is a frozen view of a Table's entries.
type Snapshot struct {
	entries seqs // a frozen copy; never mutated
}

// Len is the number of entries in the view.
func (s *Snapshot) Len() int { return s.entries.Len() }

// Ascend calls fn for every entry in Seq order until fn returns false.
func (s *Snapshot) Ascend(fn func(Entry) bool) { s.entries.Ascend(fn) }
