package index

import "strings"

// keyValues is a key with pending values. Most keys of a queue keyed by
// entity hold one value at a time, so a key keeps its first value inline
// (one) and builds a chunked list only when a second value arrives; from
// then on the list holds every value of the key.
type keyValues struct {
	name string       // the key; its values share this copy
	one  pendingValue // the key's only value while list is nil
	list *valueList   // its pending values in (Sort, Seq) order; nil while it holds one value
}

// lessKeys orders keys for pulling: by smallest pending sort key, then by
// name. A key's smallest value must not change while it is in the order
// tree: it is taken out before and put back after (see Sorted.place).
func lessKeys(a, b *keyValues) bool {
	if c := strings.Compare(a.min().sort, b.min().sort); c != 0 {
		return c < 0
	}
	return a.name < b.name
}

// min returns the key's first value; the key is not empty.
func (k *keyValues) min() *pendingValue {
	if k.list == nil {
		return &k.one
	}
	return k.list.min()
}

// count returns the number of the key's values.
func (k *keyValues) count() int {
	if k.list == nil {
		return 1
	}
	return k.list.n
}

// insert adds v in order (a value already present is replaced); gen is
// the index's generation (see valueList).
func (k *keyValues) insert(v pendingValue, gen uint64) {
	if k.list != nil {
		k.list.insert(v, gen)
		return
	}
	if cmpPending(&k.one, v.sort, v.seq) == 0 {
		k.one = v
		return
	}
	k.list = &valueList{gen: gen}
	k.list.insert(k.one, gen)
	k.list.insert(v, gen)
}

// find returns the position of the value (sort, seq): chunk 0, index 0
// for a key with one value.
func (k *keyValues) find(sortKey string, seq uint64) (ci, i int, ok bool) {
	if k.list == nil {
		return 0, 0, cmpPending(&k.one, sortKey, seq) == 0
	}
	return k.list.find(sortKey, seq)
}

// at returns the value at a position find returned, to read.
func (k *keyValues) at(ci, i int) *pendingValue {
	if k.list == nil {
		return &k.one
	}
	return &k.list.chunks[ci].vals[i]
}

// own returns the value at a position find returned, to change in
// generation gen. A key's inline value is copied into snapshots, never
// shared with them.
func (k *keyValues) own(ci, i int, gen uint64) *pendingValue {
	if k.list == nil {
		return &k.one
	}
	return &k.list.ownChunk(ci, gen).vals[i]
}

// removeAt removes the value at a position find returned, and reports
// whether the key is left without values.
func (k *keyValues) removeAt(ci, i int, gen uint64) (pendingValue, bool) {
	if k.list == nil {
		return k.one, true
	}
	v := k.list.removeAt(ci, i, gen)
	return v, k.list.n == 0
}

// each calls fn for every value in order until fn returns false; it
// reports whether it went through them all.
func (k *keyValues) each(fn func(*pendingValue) bool) bool {
	if k.list == nil {
		return fn(&k.one)
	}
	return eachValue(k.list.chunks, fn)
}

// snapshot returns the key's values as a snapshot keeps them.
func (k *keyValues) snapshot() keySnapshot {
	if k.list == nil {
		return keySnapshot{name: k.name, one: k.one}
	}
	return keySnapshot{name: k.name, chunks: k.list.chunks}
}
