package index

import "github.com/google/btree"

// runSet is an ordered set of keys that mostly arrive in increasing order
// and mostly leave oldest first: a table's lease deadlines, payload LSNs
// and enqueue times, for messages delivered from the log cursor in order
// and acked soon after. Such a key is appended to the run, a sorted
// slice, in constant time, and deleted by marking its slot gone after a
// binary search; gone slots at the run's ends are dropped at once, the
// others when they outnumber the live ones. A key that is not above the
// run's last goes to rest, a btree. Every key is in exactly one of the
// two; the set's order is their merge.
type runSet[K any] struct {
	less func(a, b K) bool
	buf  []runSlot[K]     // the run is buf[head:]: increasing keys, the first and last live
	head int              // slots before it are dropped
	gone int              // slots of the run marked gone
	rest *btree.BTreeG[K] // keys that arrived out of order
}

// runSlot is one key of a run, and whether it was deleted.
type runSlot[K any] struct {
	k    K
	gone bool
}

const (
	runCompactMin = 64   // the fewest gone slots worth compacting the run for
	runKeepCap    = 4096 // an empty run keeps an array up to this capacity
)

func newRunSet[K any](less func(a, b K) bool) *runSet[K] {
	return &runSet[K]{less: less, rest: btree.NewG(degree, less)}
}

// run returns the slots of the run.
func (s *runSet[K]) run() []runSlot[K] { return s.buf[s.head:] }

// Len is the number of keys.
func (s *runSet[K]) Len() int { return len(s.buf) - s.head - s.gone + s.rest.Len() }

// Insert adds k; a k already present stays once, as in a btree. A key
// above the run's last is appended unless rest holds one as high: rest
// can hold keys above the run's last once the run's end was dropped
// (trim), and k may be one of them.
func (s *runSet[K]) Insert(k K) {
	if r := s.run(); len(r) == 0 || s.less(r[len(r)-1].k, k) {
		if m, ok := s.rest.Max(); !ok || s.less(m, k) {
			s.buf = append(s.buf, runSlot[K]{k: k})
			return
		}
		s.rest.ReplaceOrInsert(k)
		return
	}
	if i, ok := s.find(k); ok {
		if s.run()[i].gone {
			s.run()[i].gone = false
			s.gone--
		}
		return
	}
	s.rest.ReplaceOrInsert(k)
}

// Delete removes k and reports whether it was present.
func (s *runSet[K]) Delete(k K) bool {
	i, ok := s.find(k)
	if !ok || s.run()[i].gone {
		_, ok = s.rest.Delete(k)
		return ok
	}
	s.run()[i].gone = true
	s.gone++
	s.trim()
	return true
}

// Min returns the lowest key.
func (s *runSet[K]) Min() (K, bool) {
	m, ok := s.rest.Min()
	if r := s.run(); len(r) > 0 && (!ok || s.less(r[0].k, m)) {
		return r[0].k, true
	}
	return m, ok
}

// Ascend calls fn for every key in order until fn returns false.
func (s *runSet[K]) Ascend(fn func(K) bool) {
	r := s.run()
	i, more := 0, true
	s.rest.Ascend(func(m K) bool {
		for ; i < len(r) && s.less(r[i].k, m); i++ {
			if !r[i].gone && !fn(r[i].k) {
				more = false
				return false
			}
		}
		more = fn(m)
		return more
	})
	for ; more && i < len(r); i++ {
		if !r[i].gone {
			more = fn(r[i].k)
		}
	}
}

// AscendLessThan calls fn for every key below pivot in order until fn
// returns false.
func (s *runSet[K]) AscendLessThan(pivot K, fn func(K) bool) {
	s.Ascend(func(k K) bool { return s.less(k, pivot) && fn(k) })
}

// find returns the index in the run of the first slot not below k, and
// whether that slot holds k. A key at or below the run's first, the one
// an in-order ack deletes, is found without a search.
func (s *runSet[K]) find(k K) (int, bool) {
	r := s.run()
	if len(r) == 0 || !s.less(r[0].k, k) {
		return 0, len(r) > 0 && !s.less(k, r[0].k)
	}
	lo, hi := 1, len(r)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if s.less(r[m].k, k) {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo, lo < len(r) && !s.less(k, r[lo].k)
}

// trim drops the gone slots at the run's ends, and compacts the run once
// its gone slots outnumber the live ones.
func (s *runSet[K]) trim() {
	for s.head < len(s.buf) && s.buf[s.head].gone {
		s.head++
		s.gone--
	}
	for len(s.buf) > s.head && s.buf[len(s.buf)-1].gone {
		s.buf = s.buf[:len(s.buf)-1]
		s.gone--
	}
	switch live := len(s.buf) - s.head - s.gone; {
	case live == 0 && cap(s.buf) > runKeepCap:
		s.buf, s.head = nil, 0
	case live == 0:
		s.buf, s.head = s.buf[:0], 0
	case s.gone >= runCompactMin && s.gone > live:
		s.compact()
	case s.head >= runCompactMin && s.head > len(s.buf)/2:
		n := copy(s.buf, s.buf[s.head:])
		s.buf, s.head = s.buf[:n], 0
	}
}

// compact moves the live slots to the front of the array, or to a new one
// when the array is four times the size they need.
func (s *runSet[K]) compact() {
	live := len(s.buf) - s.head - s.gone
	dst := s.buf[:0]
	if cap(s.buf) > runKeepCap && cap(s.buf) > 4*live {
		dst = make([]runSlot[K], 0, 2*live)
	}
	for _, sl := range s.run() {
		if !sl.gone {
			dst = append(dst, sl)
		}
	}
	s.buf, s.head, s.gone = dst, 0, 0
}
