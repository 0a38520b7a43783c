package index

import (
	"slices"

	"github.com/google/btree"
)

// runMax is the most items a run of a chunkSet holds.
const runMax = 128

// run is a stretch of a chunkSet's items in order; never empty while it is
// in the set's tree.
type run[T any] struct{ items []T }

// chunkSet is an ordered set of small items (pointers, LSNs) kept in runs
// of up to runMax items, the runs ordered by a B-tree on their first item.
//
// Items added after the last one fill runs completely, and a run's spare
// room grows by half at a time: about 8.5 bytes per 8-byte item. A
// B-tree of the items themselves keeps the left half of every split node
// empty but allocated, which ascending inserts (publishes, LSNs) never
// refill: 16-18 bytes per item.
type chunkSet[T any] struct {
	tree  *btree.BTreeG[*run[T]]
	cmp   func(a, b T) int
	probe run[T] // a one-item run to search the tree with
	n     int    // items in all runs
}

func newChunkSet[T any](cmp func(a, b T) int) *chunkSet[T] {
	return &chunkSet[T]{
		tree:  btree.NewG(degree, func(a, b *run[T]) bool { return cmp(a.items[0], b.items[0]) < 0 }),
		cmp:   cmp,
		probe: run[T]{items: make([]T, 1)},
	}
}

// Len returns the number of items.
func (s *chunkSet[T]) Len() int { return s.n }

// Min returns the first item.
func (s *chunkSet[T]) Min() (T, bool) {
	r, ok := s.tree.Min()
	if !ok {
		var zero T
		return zero, false
	}
	return r.items[0], true
}

// runFor returns the run where v is or would go: the last run whose first
// item is not after v, else the first run; nil when the set is empty.
func (s *chunkSet[T]) runFor(v T) *run[T] {
	// Most items come after all others (publishes, LSNs) or go first
	// (pulls take the first key): two comparisons instead of a search.
	first, ok := s.tree.Min()
	if !ok {
		return nil
	}
	if s.cmp(v, first.items[len(first.items)-1]) <= 0 {
		return first
	}
	if last, _ := s.tree.Max(); s.cmp(v, last.items[0]) >= 0 {
		return last
	}
	var found *run[T]
	s.probe.items[0] = v
	s.tree.DescendLessOrEqual(&s.probe, func(r *run[T]) bool {
		found = r
		return false
	})
	var zero T
	s.probe.items[0] = zero // hold no item past the call
	return found
}

// Get returns the item equal to v, to change in place in what does not
// order it, or nil; the pointer is good until the set next changes.
func (s *chunkSet[T]) Get(v T) *T {
	r := s.runFor(v)
	if r == nil {
		return nil
	}
	if i, found := slices.BinarySearchFunc(r.items, v, s.cmp); found {
		return &r.items[i]
	}
	return nil
}

// ReplaceOrInsert adds v, or replaces the item equal to it and reports
// that it did.
func (s *chunkSet[T]) ReplaceOrInsert(v T) (replaced bool) {
	r := s.runFor(v)
	if r == nil {
		s.tree.ReplaceOrInsert(&run[T]{items: append(make([]T, 0, 4), v)})
		s.n++
		return false
	}
	i, found := slices.BinarySearchFunc(r.items, v, s.cmp)
	if found {
		r.items[i] = v
		return true
	}
	s.n++
	if len(r.items) >= runMax {
		switch next := s.after(r); {
		case i < len(r.items):
			next = s.split(r)
			if i > len(r.items) {
				i -= len(r.items)
				r = next
			}
		case next != nil && len(next.items) < runMax:
			r, i = next, 0 // at the front of the next run
		default:
			// A run of its own (ascending inserts leave every run full).
			s.tree.ReplaceOrInsert(&run[T]{items: append(make([]T, 0, 4), v)})
			return false
		}
	}
	// i == 0 only in the first run, for an item before all others, or in
	// the run after a full one, for an item between the two: the run's new
	// first item keeps the runs in order.
	if len(r.items) == cap(r.items) {
		r.items = growRun(r.items)
	}
	r.items = slices.Insert(r.items, i, v)
	return false
}

// growRun returns items with room for about half as many more (append
// would double it: spare room is memory every item pays for; a quarter
// copies a run's items some 19 times on its way to runMax, half 10).
func growRun[T any](items []T) []T {
	grown := make([]T, len(items), min(runMax, len(items)+max(4, len(items)/2)))
	copy(grown, items)
	return grown
}

// split moves the second half of the full run r to a new run and returns
// it.
func (s *chunkSet[T]) split(r *run[T]) *run[T] {
	half := len(r.items) / 2
	next := &run[T]{items: slices.Clone(r.items[half:])}
	clear(r.items[half:])
	r.items = r.items[:half] // the rest of its array is room to grow
	s.tree.ReplaceOrInsert(next)
	return next
}

// Delete removes v and reports whether it was there.
func (s *chunkSet[T]) Delete(v T) bool {
	r := s.runFor(v)
	if r == nil {
		return false
	}
	i, found := slices.BinarySearchFunc(r.items, v, s.cmp)
	if !found {
		return false
	}
	s.n--
	if len(r.items) == 1 {
		s.tree.Delete(r)
		return true
	}
	// Removing the first item leaves the run's first item still after the
	// previous run's last: the tree stays in order.
	r.items = slices.Delete(r.items, i, i+1)
	switch {
	case len(r.items) == runMax/4-1:
		s.merge(r)
	case cap(r.items) >= 16 && len(r.items) < cap(r.items)/4:
		r.items = slices.Clip(slices.Clone(r.items)) // give back spare room
	}
	return true
}

// merge joins the run r, just short, with a neighbour when both fit in
// half a run, so that deletions spread over many runs cannot leave a run
// per item: whichever of two neighbours gets short last finds the other
// short too.
func (s *chunkSet[T]) merge(r *run[T]) {
	if next := s.after(r); next != nil && len(r.items)+len(next.items) <= runMax/2 {
		s.tree.Delete(next)
		r.items = append(r.items, next.items...)
		return
	}
	if prev := s.before(r); prev != nil && len(prev.items)+len(r.items) <= runMax/2 {
		s.tree.Delete(r)
		prev.items = append(prev.items, r.items...)
	}
}

// after returns the run after r, or nil.
func (s *chunkSet[T]) after(r *run[T]) *run[T] {
	var next *run[T]
	s.tree.AscendGreaterOrEqual(r, func(x *run[T]) bool {
		if x == r {
			return true
		}
		next = x
		return false
	})
	return next
}

// before returns the run before r, or nil.
func (s *chunkSet[T]) before(r *run[T]) *run[T] {
	var prev *run[T]
	s.tree.DescendLessOrEqual(r, func(x *run[T]) bool {
		if x == r {
			return true
		}
		prev = x
		return false
	})
	return prev
}
