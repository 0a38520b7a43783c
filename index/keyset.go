package index

import "hash/maphash"

// keySet holds a sorted queue's keys with pending values, found by name.
// It is an open-addressing hash table of pointers: a slot costs 8 bytes,
// where a map[string]*keyValues slot costs 24 (the name's header again
// and the pointer), which matters when most keys hold one value.
//
// Linear probing; a removal shifts the following entries of its run back,
// so no tombstones are needed. The table doubles when it is three
// quarters full and never shrinks, like a Go map.
type keySet struct {
	seed  maphash.Seed
	slots []*keyValues // len a power of two, or 0; nil is an empty slot
	n     int          // keys held
}

func newKeySet() keySet { return keySet{seed: maphash.MakeSeed()} }

// home returns the slot where a key named name starts its probe.
func (t *keySet) home(name string) int {
	return int(maphash.String(t.seed, name) & uint64(len(t.slots)-1))
}

// get returns the key named name, or nil.
func (t *keySet) get(name string) *keyValues {
	if t.n == 0 {
		return nil
	}
	mask := len(t.slots) - 1
	for i := t.home(name); ; i = (i + 1) & mask {
		k := t.slots[i]
		if k == nil || k.name == name {
			return k
		}
	}
}

// put adds k, whose name is not in the set.
func (t *keySet) put(k *keyValues) {
	if 4*(t.n+1) > 3*len(t.slots) {
		t.grow()
	}
	t.insert(k)
	t.n++
}

func (t *keySet) insert(k *keyValues) {
	mask := len(t.slots) - 1
	i := t.home(k.name)
	for t.slots[i] != nil {
		i = (i + 1) & mask
	}
	t.slots[i] = k
}

func (t *keySet) grow() {
	old := t.slots
	t.slots = make([]*keyValues, max(8, 2*len(old)))
	for _, k := range old {
		if k != nil {
			t.insert(k)
		}
	}
}

// remove takes the key named name out of the set, if it is there.
func (t *keySet) remove(name string) {
	if t.n == 0 {
		return
	}
	mask := len(t.slots) - 1
	i := t.home(name)
	for ; t.slots[i] != nil && t.slots[i].name != name; i = (i + 1) & mask {
	}
	if t.slots[i] == nil {
		return
	}
	t.slots[i] = nil
	t.n--
	// Shift back the entries after i whose probe passed through i.
	for j := (i + 1) & mask; t.slots[j] != nil; j = (j + 1) & mask {
		h := t.home(t.slots[j].name)
		if (j-h)&mask >= (j-i)&mask { // h is not in (i, j]: the entry may move to i
			t.slots[i], t.slots[j] = t.slots[j], nil
			i = j
		}
	}
}

// each calls fn for every key, in no particular order, until fn returns
// false.
func (t *keySet) each(fn func(*keyValues) bool) {
	for _, k := range t.slots {
		if k != nil && !fn(k) {
			return
		}
	}
}
