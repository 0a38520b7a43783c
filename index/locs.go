package index

import "github.com/google/btree"

// locSet holds the Loc of every value the index holds (pending, leased or
// dead), so that the lowest is known in O(log n). Locs are unique: each is
// the LSN of the one record that holds that value's payload.
type locSet struct {
	tree *btree.BTreeG[uint64]
}

func newLocSet() locSet {
	return locSet{tree: btree.NewOrderedG[uint64](degree)}
}

func (c *locSet) add(loc uint64)    { c.tree.ReplaceOrInsert(loc) }
func (c *locSet) remove(loc uint64) { c.tree.Delete(loc) }

// min returns the lowest Loc, or false when the set is empty.
func (c *locSet) min() (uint64, bool) { return c.tree.Min() }
