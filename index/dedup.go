package index

import "github.com/google/btree"

// DedupItem is one producer-given message id that Dedup remembers.
type DedupItem struct {
	_msgpack struct{} `msgpack:",as_array"` // stored in snapshots as an array

	ID      string // producer-given message id
	Seq     uint64 // the message's sequence
	AckedAt int64  // unix ns of its ack; 0 while the message is live
}

type ackKey struct {
	at int64  // unix ns of the ack
	id string // tie breaker
}

func lessAckKey(a, b ackKey) bool {
	if a.at != b.at {
		return a.at < b.at
	}
	return a.id < b.id
}

// Dedup is the set of producer-given ids that an enqueue may not reuse:
// those of live messages, and those acked within the dedup window.
type Dedup struct {
	ids   *btree.BTreeG[DedupItem] // by ID
	acked *btree.BTreeG[ackKey]    // acked ids by ack time
}

// NewDedup returns an empty set.
func NewDedup() *Dedup {
	return &Dedup{
		ids:   btree.NewG(degree, func(a, b DedupItem) bool { return a.ID < b.ID }),
		acked: btree.NewG(degree, lessAckKey),
	}
}

// Len is the number of ids remembered.
func (d *Dedup) Len() int { return d.ids.Len() }

// Kept is the number of acked ids remembered: those Expire may forget.
func (d *Dedup) Kept() int { return d.acked.Len() }

// Has reports whether id is remembered.
func (d *Dedup) Has(id string) bool { return d.ids.Has(DedupItem{ID: id}) }

// Get returns the item remembered for id.
func (d *Dedup) Get(id string) (DedupItem, bool) { return d.ids.Get(DedupItem{ID: id}) }

// Put remembers it.
func (d *Dedup) Put(it DedupItem) {
	if old, ok := d.ids.ReplaceOrInsert(it); ok && old.AckedAt != 0 {
		d.acked.Delete(ackKey{old.AckedAt, old.ID})
	}
	if it.AckedAt != 0 {
		d.acked.ReplaceOrInsert(ackKey{it.AckedAt, it.ID})
	}
}

// Acked records that the message seq with id was acked (or purged) at the
// given time; with keep false it forgets the id at once. An id that now
// belongs to another message is left alone.
func (d *Dedup) Acked(id string, seq uint64, at int64, keep bool) {
	it, ok := d.ids.Get(DedupItem{ID: id})
	if !ok || it.Seq != seq {
		return
	}
	if !keep {
		d.Remove(id)
		return
	}
	it.AckedAt = at
	d.Put(it)
}

// Remove forgets id.
func (d *Dedup) Remove(id string) {
	if old, ok := d.ids.Delete(DedupItem{ID: id}); ok && old.AckedAt != 0 {
		d.acked.Delete(ackKey{old.AckedAt, old.ID})
	}
}

// Expire forgets every acked id whose ack is before the given time, and
// returns how many.
func (d *Dedup) Expire(before int64) int {
	n := 0
	for {
		k, ok := d.acked.Min()
		if !ok || k.at >= before {
			return n
		}
		d.acked.DeleteMin()
		d.ids.Delete(DedupItem{ID: k.id})
		n++
	}
}

// Snapshot returns a frozen copy-on-write clone of the items.
func (d *Dedup) Snapshot() *DedupSnapshot {
	return &DedupSnapshot{ids: d.ids.Clone()}
}

// DedupSnapshot is a frozen view of a Dedup.
type DedupSnapshot struct {
	ids *btree.BTreeG[DedupItem] // a clone; never mutated
}

// Len is the number of items in the view.
func (s *DedupSnapshot) Len() int { return s.ids.Len() }

// Ascend calls fn for every item in id order until fn returns false.
func (s *DedupSnapshot) Ascend(fn func(DedupItem) bool) {
	s.ids.Ascend(func(it DedupItem) bool { return fn(it) })
}
