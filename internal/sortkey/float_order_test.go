package sortkey_test

import (
	"bytes"
	"math"
	"testing"

	"github.com/walq/walq/internal/sortkey"
)

// TestEncodeFloatOrder: floats encode in their numeric order, from -Inf
// through the subnormals and both zeros (-0 just before +0) to +Inf, and
// decode to the same bits, as float64 and float32.
func TestEncodeFloatOrder(t *testing.T) {
	ordered := []float64{math.Inf(-1), -math.MaxFloat64, -1e300, -1, -math.SmallestNonzeroFloat64, math.Copysign(0, -1), 0,
		math.SmallestNonzeroFloat64, 1, 1e300, math.MaxFloat64, math.Inf(1)}
	var prev []byte
	for i, f := range ordered {
		b, err := sortkey.Encode(f)
		if err != nil {
			t.Fatalf("%v: %v", f, err)
		}
		if i > 0 && bytes.Compare(prev, b) >= 0 {
			t.Fatalf("%v encodes at or before %v", f, ordered[i-1])
		}
		back, err := sortkey.Decode[float64](b)
		if err != nil || math.Float64bits(back) != math.Float64bits(f) {
			t.Fatalf("%v decodes to %v, %v", f, back, err)
		}
		prev = b
	}
	ordered32 := []float32{float32(math.Inf(-1)), -math.MaxFloat32, -1, -math.SmallestNonzeroFloat32, float32(math.Copysign(0, -1)), 0,
		math.SmallestNonzeroFloat32, 1, math.MaxFloat32, float32(math.Inf(1))}
	prev = nil
	for i, f := range ordered32 {
		b, err := sortkey.Encode(f)
		if err != nil {
			t.Fatalf("%v: %v", f, err)
		}
		if i > 0 && bytes.Compare(prev, b) >= 0 {
			t.Fatalf("float32 %v encodes at or before %v", f, ordered32[i-1])
		}
		back, err := sortkey.Decode[float32](b)
		if err != nil || math.Float32bits(back) != math.Float32bits(f) {
			t.Fatalf("float32 %v decodes to %v, %v", f, back, err)
		}
		prev = b
	}
}
