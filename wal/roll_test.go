package wal

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	twal "github.com/tidwall/wal"
)

func TestPlanRolls(t *testing.T) {
	for _, tc := range []struct {
		name   string
		tail   int64
		frames []int64
		offs   []int64
		starts []int
		sealed []int64
		after  int64
	}{
		{"fits", 10, []int64{5, 5}, []int64{10, 15}, nil, nil, 20},
		{"fills exactly: new empty tail", 90, []int64{10}, []int64{90}, []int{1}, []int64{100}, 0},
		{"rolls mid-batch", 80, []int64{15, 15, 15}, []int64{80, 95, 0}, []int{2}, []int64{110}, 15},
		{"oversized tail rolls first", 150, []int64{10}, []int64{0}, []int{0}, []int64{150}, 10},
		{"entry bigger than a segment", 0, []int64{250, 1}, []int64{0, 0}, []int{1}, []int64{250}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := planRolls(tc.tail, 100, tc.frames)
			if !equal(p.offs, tc.offs) || !equal(p.starts, tc.starts) || !equal(p.sealed, tc.sealed) || p.tail != tc.after {
				t.Fatalf("planRolls = %+v, want offs %v starts %v sealed %v tail %d", p, tc.offs, tc.starts, tc.sealed, tc.after)
			}
		})
	}
}

func equal[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestPlanRollsMatchesTidwall drives tidwall/wal directly with random
// batches and checks the predicted files and sizes against the directory.
func TestPlanRollsMatchesTidwall(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	dir := t.TempDir()
	const segSize = 1000
	tw, err := twal.Open(dir, &twal.Options{NoSync: true, SegmentSize: segSize, SegmentCacheSize: 1, AllowEmpty: true})
	if err != nil {
		t.Fatal(err)
	}
	defer tw.Close()
	want := map[string]int64{segmentName(1): 0} // predicted file sizes
	tailName, tail, next := segmentName(1), int64(0), uint64(1)
	for range 200 {
		var b twal.Batch
		var frames []int64
		for range 1 + rng.IntN(8) {
			data := make([]byte, rng.IntN(400))
			b.Write(next+uint64(len(frames)), data)
			frames = append(frames, frameSize(len(data)))
		}
		p := planRolls(tail, segSize, frames)
		if err := tw.WriteBatch(&b); err != nil {
			t.Fatal(err)
		}
		for j, k := range p.starts {
			want[tailName] = p.sealed[j]
			tailName = segmentName(next + uint64(k))
		}
		want[tailName], tail = p.tail, p.tail
		next += uint64(len(frames))
	}
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(des) != len(want) {
		t.Fatalf("%d files, predicted %d", len(des), len(want))
	}
	for name, size := range want {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil || fi.Size() != size {
			t.Fatalf("%s: %v, size %d, predicted %d", name, err, fi.Size(), size)
		}
	}
}
