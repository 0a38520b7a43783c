package wal

import (
	"os"
	"reflect"
	"testing"
)

// TestSegmentListLayout checks that segmentList takes tidwall/wal's list
// of segments only when a segment is v1.2.1's, {path, index, ebuf, epos}
// and nothing else: a segment that held more (a file of its own, say)
// would keep it once dropped from the list, so truncateFront must reopen
// tidwall/wal instead.
func TestSegmentListLayout(t *testing.T) {
	type bpos struct{ pos, end int }
	type v121 struct {
		path  string
		index uint64
		ebuf  []byte
		epos  []bpos
	}
	type withFile struct {
		path  string
		index uint64
		ebuf  []byte
		epos  []bpos
		file  *os.File
	}
	type indexOnly struct{ index uint64 }
	cases := []struct {
		name string
		list any
		want bool
	}{
		{"v1.2.1", []*v121{}, true},
		{"a segment with a file of its own", []*withFile{}, false},
		{"a segment with an index only", []*indexOnly{}, false},
		{"segments by value", []v121{}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := isSegmentsType(reflect.ValueOf(c.list)); got != c.want {
				t.Errorf("isSegmentsType(%T) = %v, want %v", c.list, got, c.want)
			}
		})
	}
}
