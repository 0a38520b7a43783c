package index

import (
	"bytes"
	"cmp"
	"math"

	"github.com/google/btree"
)

// SortedValue is one value published to a sorted queue. It is kept small:
// a large backlog holds one per pending value. Its payload stays in the
// log unless the index caches it (Sorted.Cache).
type SortedValue struct {
	Key        string // message key: a key's pending values are pulled together
	Sort       []byte // sort key, encoded so that byte order is key order
	Seq        uint64 // LSN of the publish record: the value's identity
	Loc        uint64 // LSN of the record holding the payload: Seq until moved
	At         int64  // unix ns of the publish
	Size       uint32 // bytes of the record at Loc
	Deliveries uint32 // times pulled so far
}

// DeadValue is a value in the dead set, with why it is there.
type DeadValue struct {
	SortedValue
	Reason string
}

func lessValue(a, b SortedValue) bool {
	if a.Key != b.Key {
		return a.Key < b.Key
	}
	if c := bytes.Compare(a.Sort, b.Sort); c != 0 {
		return c < 0
	}
	return a.Seq < b.Seq
}

// Batch is a key's values pulled together and leased as one.
type Batch struct {
	Lease  uint64        // LSN of the pull record: the batch's identity
	Key    string        // the key
	Due    int64         // lease deadline, unix ns
	At     int64         // unix ns of the pull
	Values []SortedValue // in sort order
}

// hold keeps a key out of the pull order until a time (a nack delay).
type hold struct {
	at  int64 // unix ns
	key string
}

// Sorted is the index of a sorted queue: pending values by key and sort
// key, the pull order of keys, leased batches and dead values.
//
// A pending value costs about 60-72 bytes of memory when keys hold many
// values (BenchmarkSortedMemory): a key's values sit in its own list of
// compact 48-byte entries (no key, no tree node per value), filled runs of
// key pointers order the keys, and bitmap words of Locs answer MinLoc.
// MinPublishedAt costs an 8-byte time per key, not per value (sorted_age.go).
// A key with a single value keeps it inline and costs about 119 bytes with
// its name and sort key (keySet, keyValues, two chunkSets, locSet); a key's
// second value alone costs 48 bytes and a map entry (twos), so a key with
// two costs about 106 bytes per value.
type Sorted struct {
	keys      keySet                       // keys with pending values
	twos      map[*keyValues]*pendingValue // the second value of keys with two and no list
	lists     map[*keyValues]*valueList    // the values after the first, of keys with more than two
	pending   int                          // pending values in keys
	gen       uint64                       // bumped by Snapshot: older lists and chunks are shared with one
	locs      locSet                       // Loc of every pending, leased and dead value
	ages      *chunkSet[int64]             // earliest At of each key with pending values and leased batch with values (sorted_age.go)
	ageDups   map[int64]int                // At -> entries of ages beyond the first with that At
	stale     map[*keyValues]struct{}      // keys whose list's oldest may lag (sorted_age.go)
	order     *chunkSet[*keyValues]        // pullable keys by smallest pending sort key (cmpKeys)
	batches   *btree.BTreeG[Batch]         // leased batches by Lease
	deadlines *btree.BTreeG[timeKey]       // (deadline, lease) of leased batches
	holds     *btree.BTreeG[hold]          // keys held back by a nack delay, by time, until pulled or emptied
	held      map[string]int64             // key -> hold time
	released  int64                        // unix ns of the last Release: a hold at or before it holds nothing back
	inflight  map[string]int               // key -> leased batches
	leased    int                          // values in leased batches
	dead      *btree.BTreeG[DeadValue]     // dead values by Seq
	single    bool                         // a key with a leased batch is not pullable
	cache     map[uint64][]byte            // Seq -> payload of some pending or leased values
	cached    int64                        // payload bytes in cache
	bytes     int64                        // sum of Size over all values
}

// NewSorted returns an empty index. With singleFlight, a key that has a
// leased batch is not pulled again until that batch is acked or returned.
func NewSorted(singleFlight bool) *Sorted {
	return &Sorted{
		keys:      newKeySet(),
		twos:      make(map[*keyValues]*pendingValue),
		lists:     make(map[*keyValues]*valueList),
		gen:       1,
		locs:      newLocSet(),
		ages:      newChunkSet(cmp.Compare[int64]),
		ageDups:   make(map[int64]int),
		stale:     make(map[*keyValues]struct{}),
		order:     newChunkSet(cmpKeys),
		batches:   btree.NewG(degree, func(a, b Batch) bool { return a.Lease < b.Lease }),
		deadlines: btree.NewG(degree, lessTimeKey),
		holds: btree.NewG(degree, func(a, b hold) bool {
			if a.at != b.at {
				return a.at < b.at
			}
			return a.key < b.key
		}),
		held:     make(map[string]int64),
		released: math.MinInt64,
		inflight: make(map[string]int),
		dead:     btree.NewG(degree, func(a, b DeadValue) bool { return a.Seq < b.Seq }),
		single:   singleFlight,
		cache:    make(map[uint64][]byte),
	}
}

// SortedCounts is the size of a Sorted index.
type SortedCounts struct {
	Pending, Keys, Batches, Leased, Dead int
}

// Counts returns the number of pending values, keys with pending values
// that can be pulled, leased batches and their values, and dead values.
func (s *Sorted) Counts() SortedCounts {
	return SortedCounts{Pending: s.pending, Keys: s.order.Len(), Batches: s.batches.Len(),
		Leased: s.leased, Dead: s.dead.Len()}
}

// CachedBytes is the payload bytes held in memory.
func (s *Sorted) CachedBytes() int64 { return s.cached }

// Cache keeps the payload of the pending value seq in memory until the
// value is acked, dropped or dead.
func (s *Sorted) Cache(seq uint64, payload []byte) {
	s.uncache(seq)
	s.cache[seq] = payload
	s.cached += int64(len(payload))
}

// Cached returns the payload of value seq if it is held in memory.
func (s *Sorted) Cached(seq uint64) ([]byte, bool) {
	p, ok := s.cache[seq]
	return p, ok
}

func (s *Sorted) uncache(seq uint64) {
	if p, ok := s.cache[seq]; ok {
		s.cached -= int64(len(p))
		delete(s.cache, seq)
	}
}

// Publish adds a pending value. Values of one key share one copy of the
// key string.
func (s *Sorted) Publish(v SortedValue) {
	s.addPending(v)
	s.bytes += int64(v.Size)
	s.locs.add(v.Loc)
}

// addPending puts v among the pending values and keeps the key's place in
// the pull order.
func (s *Sorted) addPending(v SortedValue) {
	h := s.keys.hash(v.Key)
	kv := s.keys.find(v.Key, h)
	if kv == nil {
		kv = &keyValues{name: v.Key, one: pendingOf(v)}
		s.keys.add(kv, h)
		s.pending++
		s.addAge(kv.one.at)
		s.placeKey(kv)
		return
	}
	k := s.ref(kv)
	p := pendingOf(v)
	// A value after the key's first leaves the key's place in the pull
	// order as it is; one before it moves the key.
	first := cmpPending(&k.one, p.sort, p.seq) > 0
	if first {
		s.order.Delete(k.keyValues)
	}
	n := k.count()
	out := k.list == nil
	if out { // insert may change the values the key's entry points into
		s.unage(k)
	}
	was := k
	old, replaced := k.insert(p, s.gen)
	s.keep(k, was)
	s.agePending(k, out, p, old, replaced)
	s.pending += k.count() - n
	if first {
		s.placeKey(k.keyValues)
	}
}

// key returns the key named name with its values after the first, and
// whether it has pending values.
func (s *Sorted) key(name string) (keyRef, bool) {
	kv := s.keys.get(name)
	if kv == nil {
		return keyRef{}, false
	}
	return s.ref(kv), true
}

// ref returns kv with its values after the first.
func (s *Sorted) ref(kv *keyValues) keyRef {
	k := keyRef{keyValues: kv}
	if len(s.lists) > 0 {
		k.list = s.lists[kv]
	}
	if k.list == nil && len(s.twos) > 0 {
		k.two = s.twos[kv]
	}
	return k
}

// keep stores the key's second value and list after a change to k, was
// being k before it.
func (s *Sorted) keep(k, was keyRef) {
	switch {
	case k.two == was.two:
	case k.two == nil:
		delete(s.twos, k.keyValues)
	default:
		s.twos[k.keyValues] = k.two
	}
	if k.list != was.list {
		s.lists[k.keyValues] = k.list // a list goes only with its key (see removePending)
	}
}

// removeKey forgets a key left without pending values, and its hold: a
// hold keeps back the values a nack put back, not values published later.
func (s *Sorted) removeKey(k keyRef) {
	s.endHold(k.name)
	s.keys.remove(k.keyValues)
	if k.list != nil {
		delete(s.lists, k.keyValues)
	}
	if k.two != nil {
		delete(s.twos, k.keyValues)
	}
}

// Bytes is the sum of the values' Size: the log bytes they need.
func (s *Sorted) Bytes() int64 { return s.bytes }

// firstPending returns the key's pending value with the smallest sort key.
func (s *Sorted) firstPending(key string) (SortedValue, bool) {
	k, ok := s.key(key)
	if !ok {
		return SortedValue{}, false
	}
	return k.one.value(k.name), true
}

// unplace removes key from the pull order.
func (s *Sorted) unplace(key string) {
	if k := s.keys.get(key); k != nil {
		s.order.Delete(k)
	}
}

// place puts key in the pull order if it has pending values and is neither
// held nor, under single flight, leased.
func (s *Sorted) place(key string) {
	if s.pullable(key) {
		if k := s.keys.get(key); k != nil {
			s.order.ReplaceOrInsert(k)
		}
	}
}

// placeKey is place for a key with pending values.
func (s *Sorted) placeKey(k *keyValues) {
	if s.pullable(k.name) {
		s.order.ReplaceOrInsert(k)
	}
}

// pullable reports whether key is neither held (by the time of the last
// Release) nor, under single flight, leased.
func (s *Sorted) pullable(key string) bool {
	at, held := s.held[key]
	return !(held && at > s.released) && !(s.single && s.inflight[key] > 0)
}

// Next returns the key first in pull order and its smallest sort key.
func (s *Sorted) Next() (key string, sort []byte, ok bool) {
	k, ok := s.order.Min()
	if !ok {
		return "", nil, false
	}
	return k.name, sortBytes(k.one.sort), true
}

// Take removes every pending value of key and leases them as one batch.
func (s *Sorted) Take(key string, lease uint64, at, due int64) Batch {
	b := Batch{Lease: lease, Key: key, Due: due, At: at}
	aged := false
	if k, ok := s.key(key); ok {
		b.Key = k.name
		s.order.Delete(k.keyValues)
		aged = s.handAge(k)
		b.Values = make([]SortedValue, 0, k.count())
		k.each(func(p *pendingValue) bool {
			v := p.value(k.name)
			v.Deliveries++
			b.Values = append(b.Values, v)
			return true
		})
		s.pending -= k.count()
		s.removeKey(k)
	}
	s.putBatch(b, aged)
	return b
}

// putBatch leases b; with aged, b's entry in Sorted.ages is there already
// (see handAge).
func (s *Sorted) putBatch(b Batch, aged bool) {
	s.batches.ReplaceOrInsert(b)
	s.deadlines.ReplaceOrInsert(timeKey{b.Due, b.Lease})
	s.inflight[b.Key]++
	s.leased += len(b.Values)
	if !aged {
		s.ageBatch(b, true)
	}
}

// Batch returns the leased batch with the given lease.
func (s *Sorted) Batch(lease uint64) (Batch, bool) { return s.batches.Get(Batch{Lease: lease}) }

// Extend moves a leased batch's deadline.
func (s *Sorted) Extend(lease uint64, due int64) bool {
	b, ok := s.batches.Get(Batch{Lease: lease})
	if ok {
		s.deadlines.Delete(timeKey{b.Due, b.Lease})
		b.Due = due
		s.batches.ReplaceOrInsert(b)
		s.deadlines.ReplaceOrInsert(timeKey{b.Due, b.Lease})
	}
	return ok
}

// Ack removes a leased batch for good.
func (s *Sorted) Ack(lease uint64) (Batch, bool) {
	b, ok := s.removeBatch(lease)
	if ok {
		for _, v := range b.Values {
			s.uncache(v.Seq)
			s.bytes -= int64(v.Size)
			s.locs.remove(v.Loc)
		}
		s.place(b.Key)
	}
	return b, ok
}

// Return puts a leased batch's values back at their sort keys. Values for
// which dead returns true go to the dead set instead, with reason. With
// holdUntil not 0 (negative before 1970) the key is not pulled before
// that time, if any value was put back: a hold of a batch whose values
// all went dead would only hold back values published since, which were
// never delivered.
func (s *Sorted) Return(lease uint64, holdUntil int64, dead func(SortedValue) bool, reason string) (Batch, bool) {
	b, ok := s.removeBatch(lease)
	if !ok {
		return b, false
	}
	back := 0
	for _, v := range b.Values {
		if dead(v) {
			s.uncache(v.Seq)
			s.dead.ReplaceOrInsert(DeadValue{v, reason})
			continue
		}
		s.addPending(v)
		back++
	}
	s.unplace(b.Key)
	if holdUntil != 0 && back > 0 {
		s.Hold(b.Key, holdUntil)
	}
	s.place(b.Key)
	return b, true
}

func (s *Sorted) removeBatch(lease uint64) (Batch, bool) {
	b, ok := s.batches.Delete(Batch{Lease: lease})
	if !ok {
		return b, false
	}
	s.deadlines.Delete(timeKey{b.Due, b.Lease})
	s.leased -= len(b.Values)
	s.ageBatch(b, false)
	if s.inflight[b.Key]--; s.inflight[b.Key] <= 0 {
		delete(s.inflight, b.Key)
	}
	return b, true
}

// Hold keeps key out of the pull order until at, judged by the time of
// the last Release, and ends when the key is pulled (Take) or left without
// pending values. A key that has a hold keeps the later of the two: its
// hold keeps back values a nack put back since its last pull, which an
// earlier end would hand out before their delay. A key with no pending
// value gets none (a hold an older snapshot kept for a key since
// pulled): it would hold back values published later.
func (s *Sorted) Hold(key string, at int64) {
	if s.keys.get(key) == nil {
		return
	}
	if was, ok := s.held[key]; ok {
		at = max(at, was)
	}
	s.endHold(key)
	s.held[key] = at
	s.holds.ReplaceOrInsert(hold{at, key})
	s.unplace(key)
	s.place(key)
}

// endHold ends key's hold, if it has one.
func (s *Sorted) endHold(key string) {
	if at, ok := s.held[key]; ok {
		s.holds.Delete(hold{at, key})
		delete(s.held, key)
	}
}

// Release judges the holds by now: a key whose hold is at or before now is
// pulled as if it had none, and one whose hold is after now is held, also
// after a Release at a later time (the clock stepped back). A hold is a
// function of its time and now alone, never of when Release was called,
// so that a replay of the log, which holds every key its records held
// until they were pulled, holds what the live index held.
func (s *Sorted) Release(now int64) {
	lo, hi := min(s.released, now), max(s.released, now)
	s.released = now
	if lo == hi {
		return
	}
	s.holds.AscendGreaterOrEqual(hold{at: lo + 1}, func(h hold) bool { // the holds in (lo, hi] change sides
		if h.at > hi {
			return false
		}
		s.unplace(h.key)
		s.place(h.key)
		return true
	})
}

// NextHold returns the earliest hold time after the last Release's.
func (s *Sorted) NextHold() (int64, bool) {
	var at int64
	found := false
	if s.released < math.MaxInt64 {
		s.holds.AscendGreaterOrEqual(hold{at: s.released + 1}, func(h hold) bool {
			at, found = h.at, true
			return false
		})
	}
	return at, found
}

// NextDeadline returns the earliest batch deadline.
func (s *Sorted) NextDeadline() (int64, bool) {
	k, ok := s.deadlines.Min()
	return k.at, ok
}

// Expired returns up to max leased batches whose deadline is at or before
// now.
func (s *Sorted) Expired(now int64, max int) []Batch {
	var out []Batch
	s.deadlines.Ascend(func(k timeKey) bool {
		if k.at > now || len(out) >= max {
			return false
		}
		b, _ := s.Batch(k.seq)
		out = append(out, b)
		return true
	})
	return out
}
