package index

import (
	"math"

	"github.com/google/btree"
)

const degree = 32

// Table holds every Entry, keyed by Seq, with one ordered set per state
// and the orders that answer its minima (MinLoc, MinEnqueuedAt) in
// O(log n). Put is the only way an entry changes, so the sets never
// disagree with the entries.
type Table struct {
	entries  seqs                   // all entries, by Seq
	ready    *btree.BTreeG[uint64]  // Seq of Ready entries, but those Undelivered, and of the Delayed ones in due
	fresh    *btree.BTreeG[uint64]  // Seq of Ready entries Undelivered: delivered after ready
	delayed  *btree.BTreeG[timeKey] // Delayed entries by (Due, Seq) whose Due is after the time set last (SetNow)
	due      *btree.BTreeG[timeKey] // the other Delayed entries by (Due, Seq): Due at or before that time
	now      int64                  // unix ns: the time set last (SetNow), math.MinInt64 before the first
	leases   *runSet[timeKey]       // Leased entries by (deadline, Seq)
	dead     *btree.BTreeG[uint64]  // Seq of Dead entries
	locs     *runSet[locKey]        // every entry by (Loc, Seq)
	enqueued *runSet[timeKey]       // entries that are not Dead by (EnqueuedAt, Seq)
	byID     map[string]uint64      // ID -> Seq, for every entry with an ID; nil until the first GetByID (byIDIndex)
	bytes    int64                  // sum of Size over entries
}

// NewTable returns an empty table.
func NewTable() *Table {
	return &Table{
		entries:  newSeqs(),
		ready:    btree.NewOrderedG[uint64](degree),
		fresh:    btree.NewOrderedG[uint64](degree),
		delayed:  btree.NewG(degree, lessTimeKey),
		due:      btree.NewG(degree, lessTimeKey),
		now:      math.MinInt64,
		leases:   newRunSet(lessTimeKey),
		dead:     btree.NewOrderedG[uint64](degree),
		locs:     newRunSet(lessLocKey),
		enqueued: newRunSet(lessTimeKey),
	}
}

// Len is the number of entries.
func (t *Table) Len() int { return t.entries.Len() }

// Bytes is the sum of the entries' Size.
func (t *Table) Bytes() int64 { return t.bytes }

// Get returns the entry with sequence seq.
func (t *Table) Get(seq uint64) (Entry, bool) {
	return t.entries.Get(seq)
}

// GetByID returns the entry whose message id is id. The first call builds
// the index by id, in time proportional to the entries; from then on Put
// and Delete keep it, so a table never asked by id pays nothing for it.
func (t *Table) GetByID(id string) (Entry, bool) {
	seq, ok := t.byIDIndex()[id]
	if !ok {
		return Entry{}, false
	}
	return t.Get(seq)
}

// byIDIndex returns byID, built from the entries on first use.
func (t *Table) byIDIndex() map[string]uint64 {
	if t.byID == nil {
		t.byID = make(map[string]uint64, t.entries.Len())
		t.entries.Ascend(func(e Entry) bool {
			if e.ID != "" {
				t.byID[e.ID] = e.Seq
			}
			return true
		})
	}
	return t.byID
}

// Put inserts e or replaces the entry with the same Seq. An entry that is
// not Ready is never Undelivered: Put clears the flag.
func (t *Table) Put(e Entry) {
	if e.State != Ready {
		e.Undelivered = false
	}
	if old, ok := t.entries.Put(e); ok {
		t.unlink(old)
	}
	t.link(e)
}

// Delete removes the entry with sequence seq and returns it.
func (t *Table) Delete(seq uint64) (Entry, bool) {
	e, ok := t.entries.Delete(seq)
	if ok {
		t.unlink(e)
	}
	return e, ok
}

func (t *Table) link(e Entry) {
	switch e.State {
	case Ready:
		t.readySet(e).ReplaceOrInsert(e.Seq)
	case Delayed:
		t.linkDelayed(timeKey{e.Due, e.Seq})
	case Leased:
		t.leases.Insert(timeKey{e.Due, e.Seq})
	case Dead:
		t.dead.ReplaceOrInsert(e.Seq)
	}
	t.locs.Insert(locKey{e.Loc, e.Seq})
	if e.State != Dead {
		t.enqueued.Insert(timeKey{e.EnqueuedAt, e.Seq})
	}
	if e.ID != "" && t.byID != nil {
		t.byID[e.ID] = e.Seq
	}
	t.bytes += int64(e.Size)
}

func (t *Table) unlink(e Entry) {
	switch e.State {
	case Ready:
		t.readySet(e).Delete(e.Seq)
	case Delayed:
		t.unlinkDelayed(timeKey{e.Due, e.Seq})
	case Leased:
		t.leases.Delete(timeKey{e.Due, e.Seq})
	case Dead:
		t.dead.Delete(e.Seq)
	}
	t.locs.Delete(locKey{e.Loc, e.Seq})
	if e.State != Dead {
		t.enqueued.Delete(timeKey{e.EnqueuedAt, e.Seq})
	}
	if e.ID != "" && t.byID != nil && t.byID[e.ID] == e.Seq {
		delete(t.byID, e.ID)
	}
	t.bytes -= int64(e.Size)
}

// linkDelayed adds the Delayed entry k to delayed, or to due and ready
// when its Due is at or before the time set last, as SetNow would.
func (t *Table) linkDelayed(k timeKey) {
	if k.at > t.now {
		t.delayed.ReplaceOrInsert(k)
		return
	}
	t.due.ReplaceOrInsert(k)
	t.ready.ReplaceOrInsert(k.seq)
}

// unlinkDelayed removes the Delayed entry k from delayed, or else from
// due and ready, where SetNow moved it.
func (t *Table) unlinkDelayed(k timeKey) {
	if _, ok := t.delayed.Delete(k); !ok {
		t.due.Delete(k)
		t.ready.Delete(k.seq)
	}
}

// readySet returns the set that holds the Ready entry e.
func (t *Table) readySet(e Entry) *btree.BTreeG[uint64] {
	if e.Undelivered {
		return t.fresh
	}
	return t.ready
}
