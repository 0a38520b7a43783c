package index

import "strings"

// keyValues is a key with pending values. Most keys of a queue keyed by
// entity hold one value at a time, so a key keeps its first value (the
// smallest by sort key and seq) inline, and the values after it in a
// chunked list (in Sorted.lists) only while it has any. Without a list
// pointer a key is 64 bytes, a size class of its own.
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

// keyRef is a key with the list of its values after the first (nil when
// it has none), as Sorted.key finds them.
type keyRef struct {
	*keyValues
	list *valueList
}

// firstPos is the position (see find) of a key's first value.
const firstPos = -1

// count returns the number of the key's values.
func (k keyRef) count() int {
	if k.list == nil {
		return 1
	}
	return 1 + k.list.n
}

// insert adds v in order (a value already present is replaced); gen is
// the index's generation (see valueList). It returns the key's list,
// which is new when the key had none.
func (k keyRef) insert(v pendingValue, gen uint64) *valueList {
	c := cmpPending(&k.one, v.sort, v.seq)
	if c == 0 {
		k.one = v
		return k.list
	}
	if k.list == nil {
		k.list = &valueList{gen: gen}
	}
	if c > 0 { // v comes first
		k.one, v = v, k.one
	}
	k.list.insert(v, gen)
	return k.list
}

// find returns the position of the value (sort, seq): firstPos for the
// key's first value, else its chunk and index in the list.
func (k keyRef) find(sortKey string, seq uint64) (ci, i int, ok bool) {
	if cmpPending(&k.one, sortKey, seq) == 0 {
		return firstPos, 0, true
	}
	if k.list == nil {
		return 0, 0, false
	}
	return k.list.find(sortKey, seq)
}

// at returns the value at a position find returned, to read.
func (k keyRef) at(ci, i int) *pendingValue {
	if ci == firstPos {
		return &k.one
	}
	return &k.list.chunks[ci].vals[i]
}

// own returns the value at a position find returned, to change in
// generation gen, but not in its sort key or seq. A key's first value is
// copied into snapshots, never shared with them.
func (k keyRef) own(ci, i int, gen uint64) *pendingValue {
	if ci == firstPos {
		return &k.one
	}
	return &k.list.ownChunk(ci, gen).vals[i]
}

// removeAt removes the value at a position find returned, and reports
// whether the key is left without values. The list's first value moves
// up when the key's first goes.
func (k keyRef) removeAt(ci, i int, gen uint64) (pendingValue, bool) {
	if ci != firstPos {
		return k.list.removeAt(ci, i, gen), false
	}
	v := k.one
	if k.list == nil || k.list.n == 0 {
		return v, true
	}
	k.one = k.list.removeAt(0, 0, gen)
	return v, false
}

// each calls fn for every value in order until fn returns false; it
// reports whether it went through them all.
func (k keyRef) each(fn func(*pendingValue) bool) bool {
	if !fn(&k.one) {
		return false
	}
	return k.list == nil || eachValue(k.list.chunks, fn)
}

// snapshot returns the key's values as a snapshot keeps them.
func (k keyRef) snapshot() keySnapshot {
	if k.list == nil {
		return keySnapshot{name: k.name, one: k.one}
	}
	return keySnapshot{name: k.name, one: k.one, chunks: k.list.chunks}
}
