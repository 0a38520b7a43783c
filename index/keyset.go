package index

import (
	"hash/maphash"
	"math/bits"
)

// keySet holds a sorted queue's keys with pending values, found by name.
// It is an open-addressing hash table of pointers: a slot costs 8 bytes,
// where a map[string]*keyValues slot costs 24 (the name's header again
// and the pointer), which matters when most keys hold one value.
//
// Linear probing; a removal shifts the following entries of its run back,
// so no tombstones are needed. The table grows by half when it is three
// quarters full, so that it is between half and three quarters full (a
// doubling table is between three eighths and three quarters), and never
// shrinks, like a Go map. A hash maps to a slot by multiplication, which
// needs no power-of-two length.
type keySet struct {
	seed  maphash.Seed
	slots []*keyValues // 0 or at least 8 long; nil is an empty slot
	n     int          // keys held
}

func newKeySet() keySet { return keySet{seed: maphash.MakeSeed()} }

// hash returns name's hash, from which its probe starts.
func (t *keySet) hash(name string) uint64 { return maphash.String(t.seed, name) }

// home returns the slot where a probe for hash h starts.
func (t *keySet) home(h uint64) int {
	hi, _ := bits.Mul64(h, uint64(len(t.slots)))
	return int(hi)
}

// next returns the slot after i, wrapping around.
func (t *keySet) next(i int) int {
	if i++; i == len(t.slots) {
		return 0
	}
	return i
}

// dist returns how many slots on from i j is, wrapping around.
func (t *keySet) dist(i, j int) int {
	if j < i {
		j += len(t.slots)
	}
	return j - i
}

// get returns the key named name, or nil.
func (t *keySet) get(name string) *keyValues { return t.find(name, t.hash(name)) }

// find is get with name's hash h.
func (t *keySet) find(name string, h uint64) *keyValues {
	if t.n == 0 {
		return nil
	}
	for i := t.home(h); ; i = t.next(i) {
		k := t.slots[i]
		if k == nil || k.name == name {
			return k
		}
	}
}

// put adds k, whose name is not in the set.
func (t *keySet) put(k *keyValues) { t.add(k, t.hash(k.name)) }

// add is put with the hash h of k's name.
func (t *keySet) add(k *keyValues, h uint64) {
	if 4*(t.n+1) > 3*len(t.slots) {
		t.grow()
	}
	t.insert(k, h)
	t.n++
}

func (t *keySet) insert(k *keyValues, h uint64) {
	i := t.home(h)
	for t.slots[i] != nil {
		i = t.next(i)
	}
	t.slots[i] = k
}

func (t *keySet) grow() {
	old := t.slots
	t.slots = make([]*keyValues, max(8, len(old)+len(old)/2))
	for _, k := range old {
		if k != nil {
			t.insert(k, t.hash(k.name))
		}
	}
}

// remove takes k out of the set, if it is there. Its probe compares
// pointers, not names.
func (t *keySet) remove(k *keyValues) {
	if t.n == 0 {
		return
	}
	i := t.home(t.hash(k.name))
	for ; t.slots[i] != k; i = t.next(i) {
		if t.slots[i] == nil {
			return
		}
	}
	t.slots[i] = nil
	t.n--
	// Shift back the entries after i whose probe passed through i.
	for j := t.next(i); t.slots[j] != nil; j = t.next(j) {
		h := t.home(t.hash(t.slots[j].name))
		if t.dist(h, j) >= t.dist(i, j) { // h is not in (i, j]: the entry may move to i
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
