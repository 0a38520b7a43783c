package msgframe_test

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/walq/walq/internal/msgframe"
)

// skipped returns how many bytes msgpack's own Decoder.Skip reads as the
// first value of b, or its error.
func skipped(b []byte) (int, error) {
	r := bytes.NewReader(b)
	if err := msgpack.NewDecoder(r).Skip(); err != nil {
		return 0, err
	}
	return len(b) - r.Len(), nil
}

// skippedAll reports whether msgpack's Decoder.Skip reads b whole, value
// after value.
func skippedAll(b []byte) error {
	r := bytes.NewReader(b)
	d := msgpack.NewDecoder(r)
	for r.Len() > 0 {
		if err := d.Skip(); err != nil {
			return err
		}
	}
	return nil
}

// agree fails t unless Check and CheckAll take b as msgpack's
// Decoder.Skip does: they accept what Skip reads whole (unless nested
// past MaxDepth), refuse what Skip cannot read, and Check's value ends
// where Skip's does.
func agree(t *testing.T, b []byte) {
	t.Helper()
	if skipErr, err := skippedAll(b), msgframe.CheckAll(b); (skipErr == nil) != (err == nil) && !errors.Is(err, msgframe.ErrTooDeep) {
		t.Fatalf("CheckAll: %v, Skip to the end: %v, of % x", err, skipErr, b)
	}
	n, skipErr := skipped(b)
	err := msgframe.Check(b)
	if skipErr != nil {
		if err == nil {
			t.Fatalf("Check accepts % x, Skip refuses it: %v", b, skipErr)
		}
		return
	}
	if errors.Is(err, msgframe.ErrTooDeep) {
		return
	}
	if err != nil {
		t.Fatalf("Check refuses % x, a value Skip reads whole: %v", b, err)
	}
	if n > 0 && msgframe.Check(b[:n-1]) == nil {
		t.Fatalf("Check accepts % x, cut short of the value Skip reads in %d bytes", b[:n-1], n)
	}
}

// FuzzCheck: Check takes random bytes as msgpack's Decoder.Skip does.
//
//	go test ./internal/msgframe -run '^$' -fuzz '^FuzzCheck$' -fuzztime 30s
func FuzzCheck(f *testing.F) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 50 {
		b, err := msgpack.Marshal(randomValue(rng, 3))
		if err != nil {
			f.Fatal(err)
		}
		if len(b) < 1000 {
			f.Add(b)
		}
	}
	f.Add([]byte("\xc6\x7f\xff\xff\xff0123456789"))
	f.Add([]byte("\xdf\x80\x00\x00\x00\x01\x02"))
	f.Add([]byte("\xc7\x02\x05ab\xd8\x01"))
	f.Fuzz(func(t *testing.T, b []byte) {
		agree(t, b)
	})
}

// TestRandomValues: msgpack's encodings of random values, of every kind
// Typed may carry, pass Check; each encoding cut short or with one byte
// changed is taken by Check as Skip takes it.
func TestRandomValues(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	for range 300 {
		v := randomValue(rng, 3)
		b, err := msgpack.Marshal(v)
		if err != nil {
			t.Fatalf("seed %d: marshal %#v: %v", seed, v, err)
		}
		if err := msgframe.Check(b); err != nil {
			t.Fatalf("seed %d: Check refuses the encoding of %#v: %v", seed, v, err)
		}
		agree(t, b)
		agree(t, b[:rng.IntN(len(b))])
		c := bytes.Clone(b)
		c[rng.IntN(len(c))] = byte(rng.Uint32())
		agree(t, c)
	}
}

// point is a type with its own msgpack extension.
type point struct{ X, Y int32 }

func (p *point) MarshalMsgpack() ([]byte, error) { return msgpack.Marshal([]int32{p.X, p.Y}) }

func (p *point) UnmarshalMsgpack(b []byte) error {
	var xy []int32
	if err := msgpack.Unmarshal(b, &xy); err != nil {
		return err
	}
	if len(xy) == 2 {
		p.X, p.Y = xy[0], xy[1]
	}
	return nil
}

func init() { msgpack.RegisterExt(7, (*point)(nil)) }

// randomValue returns a random value of any kind msgpack encodes, nested
// at most depth deep.
func randomValue(rng *rand.Rand, depth int) any {
	kinds := 16
	if depth == 0 {
		kinds = 12
	}
	switch rng.IntN(kinds) {
	case 0:
		return nil
	case 1:
		return rng.IntN(2) == 0
	case 2:
		return rng.Int64() >> rng.IntN(64)
	case 3:
		return -rng.Int64() >> rng.IntN(64)
	case 4:
		return rng.Uint64() >> rng.IntN(64)
	case 5:
		return []any{float32(rng.Float64()), rng.NormFloat64(), math.Inf(1)}[rng.IntN(3)]
	case 6:
		return strings.Repeat("s", []int{0, 1, 31, 32, 255, 256, 65535, 65536}[rng.IntN(8)])
	case 7:
		return bytes.Repeat([]byte{0xc1}, []int{0, 1, 255, 256, 65535, 65536}[rng.IntN(6)])
	case 8:
		return time.Unix(rng.Int64N(1<<40)-1<<39, rng.Int64N(2)*rng.Int64N(1e9)).UTC()
	case 9:
		return &point{rng.Int32(), -rng.Int32()}
	case 10:
		n := []int{1, 2, 4, 8, 16, 3, 17, 300, 70000}[rng.IntN(9)]
		return msgpack.RawMessage(ext(int8(rng.IntN(256)-128), bytes.Repeat([]byte{0xdd}, n)))
	case 11:
		return time.Time{}
	case 12, 13:
		a := make([]any, []int{0, 1, 15, 16, 17}[rng.IntN(5)])
		for i := range a {
			a[i] = randomValue(rng, depth-1)
		}
		return a
	default:
		m := make(map[string]any)
		for range []int{0, 1, 15, 16, 17}[rng.IntN(5)] {
			m[strings.Repeat("k", rng.IntN(40))] = randomValue(rng, depth-1)
		}
		return m
	}
}

// ext returns the msgpack extension of type typ holding data.
func ext(typ int8, data []byte) []byte {
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	if err := enc.EncodeExtHeader(typ, len(data)); err != nil {
		panic(err)
	}
	buf.Write(data)
	return buf.Bytes()
}
