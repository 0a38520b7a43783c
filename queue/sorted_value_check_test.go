package queue

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/index"
)

// TestCheckValueRecord checks which records a sorted value's payload may
// be read from: its own publish, or its own copy forward; any other
// record at its Loc is ErrCorrupt, never a payload delivered.
func TestCheckValueRecord(t *testing.T) {
	v := index.SortedValue{Seq: 10, Loc: 10}
	moved := index.SortedValue{Seq: 10, Loc: 50}
	cases := []struct {
		name string
		r    record
		v    index.SortedValue
		ok   bool
	}{
		{"its publish", record{Op: opPublish}, v, true},
		{"its copy forward", record{Op: opMove, Flags: flagSorted, Seq: 10}, moved, true},
		{"another value's publish", record{Op: opPublish}, moved, false},
		{"another value's copy", record{Op: opMove, Flags: flagSorted, Seq: 11}, moved, false},
		{"a message's copy with the same seq", record{Op: opMove, Seq: 10}, moved, false},
		{"an enqueue", record{Op: opEnqueue}, v, false},
		{"a pull", record{Op: opPull, Seq: 10}, v, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := checkValueRecord(&c.r, c.v)
			if c.ok {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrCorrupt)
			require.Contains(t, err.Error(), "walq repair")
		})
	}
}
