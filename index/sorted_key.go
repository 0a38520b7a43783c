package index

import "strings"

// keyValues is a key with pending values. Most keys of a queue keyed by
// entity hold one value at a time, so a key keeps its first value (the
// smallest by sort key and seq) inline, and the values after it only while
// it has any: a second value alone (in Sorted.twos, 48 bytes), or a
// chunked list (in Sorted.lists) once a third comes. Without a pointer to
// either a key is 64 bytes, a size class of its own.
type keyValues struct {
	name string       // the key; its values share this copy
	one  pendingValue // the key's first value
}

// cmpKeys orders keys for pulling: by smallest pending sort key, then by
// name. A key's first value must not change while it is in the order
// set: it is taken out before and put back after (see Sorted.place).
func cmpKeys(a, b *keyValues) int {
	if c := strings.Compare(a.one.sort, b.one.sort); c != 0 {
		return c
	}
	return strings.Compare(a.name, b.name)
}

// keyRef is a key with its values after the first, as Sorted.key finds
// them: a second value alone (two), or a list, or neither. At most one of
// two and list is set; a list may hold a single value, after removals.
type keyRef struct {
	*keyValues
	two  *pendingValue // never changed once made: snapshots share it
	list *valueList
}

// Positions (see find) of a key's first and second value, outside a list.
const (
	firstPos = -1
	twoPos   = -2
)

// count returns the number of the key's values.
func (k keyRef) count() int {
	switch {
	case k.list != nil:
		return 1 + k.list.n
	case k.two != nil:
		return 2
	}
	return 1
}

// insert adds v in order; gen is the index's generation (see valueList).
// It returns the value v replaced (same sort key and seq), if there was
// one. It may make the key's second value or list, or move the second
// value into a new list: the caller stores k's two and list (Sorted.keep).
func (k *keyRef) insert(v pendingValue, gen uint64) (pendingValue, bool) {
	c := cmpPending(&k.one, v.sort, v.seq)
	if c == 0 {
		old := k.one
		k.one = v
		return old, true
	}
	if k.two != nil && cmpPending(k.two, v.sort, v.seq) == 0 {
		old := *k.two
		k.two = newValue(v)
		return old, true
	}
	if c > 0 { // v comes first
		k.one, v = v, k.one
	}
	switch {
	case k.list == nil && k.two == nil:
		k.two = newValue(v)
		return pendingValue{}, false
	case k.list == nil: // a third value
		k.list = &valueList{gen: gen}
		k.list.insert(*k.two, gen)
		k.two = nil
	}
	return k.list.insert(v, gen)
}

// find returns the position of the value (sort, seq): firstPos for the
// key's first value, twoPos for its second outside a list, else its chunk
// and index in the list.
func (k keyRef) find(sortKey string, seq uint64) (ci, i int, ok bool) {
	switch {
	case cmpPending(&k.one, sortKey, seq) == 0:
		return firstPos, 0, true
	case k.two != nil:
		return twoPos, 0, cmpPending(k.two, sortKey, seq) == 0
	case k.list == nil:
		return 0, 0, false
	}
	return k.list.find(sortKey, seq)
}

// at returns the value at a position find returned, to read.
func (k keyRef) at(ci, i int) *pendingValue {
	switch ci {
	case firstPos:
		return &k.one
	case twoPos:
		return k.two
	}
	return &k.list.chunks[ci].vals[i]
}

// own returns the value at a position find returned, to change in
// generation gen, but not in its sort key or seq. A key's first value is
// copied into snapshots, never shared with them; its second is copied
// here, to be stored (Sorted.keep).
func (k *keyRef) own(ci, i int, gen uint64) *pendingValue {
	switch ci {
	case firstPos:
		return &k.one
	case twoPos:
		k.two = newValue(*k.two)
		return k.two
	}
	return &k.list.ownChunk(ci, gen).vals[i]
}

// removeAt removes the value at a position find returned, and reports
// whether the key is left without values. The second value moves up when
// the key's first goes; the caller stores k's two (Sorted.keep).
func (k *keyRef) removeAt(ci, i int, gen uint64) (pendingValue, bool) {
	v := k.at(ci, i)
	switch {
	case ci >= 0:
		return k.list.removeAt(ci, i, gen), false
	case ci == twoPos:
		k.two = nil
		return *v, false
	}
	one := *v
	switch {
	case k.two != nil:
		k.one, k.two = *k.two, nil
	case k.list != nil && k.list.n > 0:
		k.one = k.list.removeAt(0, 0, gen)
	default:
		return one, true
	}
	return one, false
}

// each calls fn for every value in order until fn returns false; it
// reports whether it went through them all.
func (k keyRef) each(fn func(*pendingValue) bool) bool {
	switch {
	case !fn(&k.one):
		return false
	case k.two != nil:
		return fn(k.two)
	}
	return k.list == nil || eachValue(k.list.chunks, fn)
}

// snapshot returns the key's values as a snapshot keeps them.
func (k keyRef) snapshot() keySnapshot {
	ks := keySnapshot{name: k.name, one: k.one, two: k.two}
	if k.list != nil {
		ks.chunks = k.list.chunks
	}
	return ks
}

// newValue returns a copy of v on the heap (a key's second value).
func newValue(v pendingValue) *pendingValue {
	p := new(pendingValue)
	*p = v
	return p
}
