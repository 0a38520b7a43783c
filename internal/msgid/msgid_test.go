package msgid

import (
	"encoding/hex"
	"math/rand/v2"
	"regexp"
	"testing"
)

// v4 is the text form of a version-4, variant-10 UUID.
var v4 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

func TestNewIsV4(t *testing.T) {
	seen := make(map[string]bool)
	for range 1000 {
		id := New()
		if !v4.MatchString(id) {
			t.Fatalf("New() = %q: not a version-4 UUID", id)
		}
		if seen[id] {
			t.Fatalf("New() repeated %q", id)
		}
		seen[id] = true
	}
}

// reference is the UUID text of the bytes of a and c (least significant
// byte first), with the version and variant bits set, through
// encoding/hex.
func reference(a, c uint64) string {
	var b [16]byte
	for i := range 8 {
		b[i], b[8+i] = byte(a>>(8*i)), byte(c>>(8*i))
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

func TestFormat(t *testing.T) {
	for _, tc := range []struct {
		name string
		a, c uint64
		want string
	}{
		{"zero", 0, 0, "00000000-0000-4000-8000-000000000000"},
		{"ones", ^uint64(0), ^uint64(0), "ffffffff-ffff-4fff-bfff-ffffffffffff"},
		{"bytes in order", 0x0706050403020100, 0x0f0e0d0c0b0a0908, "00010203-0405-4607-8809-0a0b0c0d0e0f"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := format(tc.a, tc.c); got != tc.want || got != reference(tc.a, tc.c) {
				t.Errorf("format(%#x, %#x) = %q, want %q (reference %q)", tc.a, tc.c, got, tc.want, reference(tc.a, tc.c))
			}
		})
	}
	seed := rand.Uint64()
	r := rand.New(rand.NewPCG(seed, 1))
	for range 10000 {
		a, c := r.Uint64(), r.Uint64()
		if got, want := format(a, c), reference(a, c); got != want {
			t.Fatalf("seed %d: format(%#x, %#x) = %q, want %q", seed, a, c, got, want)
		}
	}
}

func BenchmarkNew(b *testing.B) {
	b.ReportAllocs()
	for range b.N {
		_ = New()
	}
}
