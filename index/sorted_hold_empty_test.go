package index_test

import (
	"testing"

	"github.com/walq/walq/index"
)

// A hold ends when its key is left without pending values, so it keeps
// back the values a nack put back and never values published later. A
// hold loaded for a key that has no pending value (a snapshot written by
// an older version, whose replay ended no hold at a pull: the key was
// pulled after its hold's time and is leased) holds back the next value
// published to the key, after a step back of the clock, until the hold's
// time comes again, though the key was pulled since.
func TestHoldOfKeyWithoutValuesHoldsNothing(t *testing.T) {
	s := index.NewSorted(false)
	s.Publish(index.SortedValue{Key: "k", Sort: sortKey(1), Seq: 1, Loc: 1})
	s.Take("k", 2, 0, 1<<40) // the key is leased, no value of it pending
	s.Hold("k", 200)         // as a snapshot's hold is loaded
	s.Release(100)           // the clock stepped back before the hold's time
	s.Publish(index.SortedValue{Key: "k", Sort: sortKey(2), Seq: 3, Loc: 3})
	key, _, ok := s.Next()
	if !ok || key != "k" {
		t.Fatalf("Next() = %q, %v: a value published after the key was left without pending values is held back", key, ok)
	}
	if _, _, _, holds := s.Snapshot().Len(); holds != 0 {
		t.Fatalf("a snapshot keeps %d holds of keys without the values they held back", holds)
	}
}
