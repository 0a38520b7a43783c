package index

import "strings"

// keyValues is a key with pending values. Most keys of a queue keyed by
// entity hold one value at a time, so a key keeps its first value inline
// (one) and gets a chunked list (in Sorted.lists) only when a second value
// arrives; from then on the list holds every value of the key and one
// holds a copy of the list's first value, so that the pull order compares
// keys without looking their lists up. Without the list pointer a key is
// 64 bytes, a size class of its own.
type keyValues struct {
	name string       // the key; its values share this copy
	one  pendingValue // the key's only value, or a copy of its list's first (its sort and seq kept current)
}

// cmpKeys orders keys for pulling: by smallest pending sort key, then by
// name. A key's smallest value must not change while it is in the order
// set: it is taken out before and put back after (see Sorted.place).
func cmpKeys(a, b *keyValues) int {
	if c := strings.Compare(a.one.sort, b.one.sort); c != 0 {
		return c
	}
	return strings.Compare(a.name, b.name)
}

// keyRef is a key with its list (nil while it holds one value), as
// Sorted.key finds them.
type keyRef struct {
	*keyValues
	list *valueList
}

// min returns the key's first value; the key is not empty.
func (k keyRef) min() *pendingValue {
	if k.list == nil {
		return &k.one
	}
	return k.list.min()
}

// count returns the number of the key's values.
func (k keyRef) count() int {
	if k.list == nil {
		return 1
	}
	return k.list.n
}

// insert adds v in order (a value already present is replaced); gen is
// the index's generation (see valueList). It returns the key's list,
// which is new when v is the key's second value.
func (k keyRef) insert(v pendingValue, gen uint64) *valueList {
	if k.list == nil {
		if cmpPending(&k.one, v.sort, v.seq) == 0 {
			k.one = v
			return nil
		}
		k.list = &valueList{gen: gen}
		k.list.insert(k.one, gen)
	}
	k.list.insert(v, gen)
	k.one = *k.list.min()
	return k.list
}

// find returns the position of the value (sort, seq): chunk 0, index 0
// for a key with one value.
func (k keyRef) find(sortKey string, seq uint64) (ci, i int, ok bool) {
	if k.list == nil {
		return 0, 0, cmpPending(&k.one, sortKey, seq) == 0
	}
	return k.list.find(sortKey, seq)
}

// at returns the value at a position find returned, to read.
func (k keyRef) at(ci, i int) *pendingValue {
	if k.list == nil {
		return &k.one
	}
	return &k.list.chunks[ci].vals[i]
}

// own returns the value at a position find returned, to change in
// generation gen, but not in its sort key or seq. A key's inline value is
// copied into snapshots, never shared with them.
func (k keyRef) own(ci, i int, gen uint64) *pendingValue {
	if k.list == nil {
		return &k.one
	}
	return &k.list.ownChunk(ci, gen).vals[i]
}

// removeAt removes the value at a position find returned, and reports
// whether the key is left without values.
func (k keyRef) removeAt(ci, i int, gen uint64) (pendingValue, bool) {
	if k.list == nil {
		return k.one, true
	}
	v := k.list.removeAt(ci, i, gen)
	if k.list.n == 0 {
		return v, true
	}
	k.one = *k.list.min()
	return v, false
}

// each calls fn for every value in order until fn returns false; it
// reports whether it went through them all.
func (k keyRef) each(fn func(*pendingValue) bool) bool {
	if k.list == nil {
		return fn(&k.one)
	}
	return eachValue(k.list.chunks, fn)
}

// snapshot returns the key's values as a snapshot keeps them.
func (k keyRef) snapshot() keySnapshot {
	if k.list == nil {
		return keySnapshot{name: k.name, one: k.one}
	}
	return keySnapshot{name: k.name, chunks: k.list.chunks}
}
