package msgframe_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"
	"github.com/walq/walq/internal/msgframe"
)

// TestValuesFit: msgpack values of every kind fit their framing; no
// prefix of one does.
func TestValuesFit(t *testing.T) {
	long := strings.Repeat("x", 70000)
	values := map[string]any{
		"strings": []any{"", long[:31], long[:32], long[:255], long[:256], long[:65535], long},
		"bytes":   []any{[]byte{}, []byte(long[:255]), []byte(long[:256]), []byte(long)},
		"numbers": []any{0, 127, -32, -33, 255, 256, 65536, int64(1) << 40, uint64(1) << 63, int64(-1) << 40,
			-129, -32769, int16(-300), int32(-70000), float32(1.5), 2.5, true, false, nil},
		"time (ext)":          []any{time.Unix(1, 0), time.Unix(1, 5), time.Unix(1<<40, 5)},
		"nested":              map[string]any{"a": []any{map[string]any{"b": []any{}}, []any{1, []any{2}}}},
		"array16":             make([]int, 16),
		"big array":           make([]int, 70000),
		"ext16, ext32":        []any{msgpack.RawMessage("\xc8\x00\x02\x05ab"), msgpack.RawMessage("\xc9\x00\x00\x00\x02\x05ab")},
		"big map":             bigMap(20),
		"bigger map (32)":     bigMap(70000),
		"struct":              struct{ A, B string }{"a", long},
		"nested to the limit": nested(msgframe.MaxDepth),
	}
	for name, v := range values {
		t.Run(name, func(t *testing.T) {
			b, err := msgpack.Marshal(v)
			require.NoError(t, err)
			require.NoError(t, msgframe.Check(b), "the whole value")
			require.NoError(t, msgframe.Check(append(b, 0xc1)), "the value, then bytes it does not hold")
			step := 1 + len(b)/500
			for i := 0; i < len(b); i += step {
				require.ErrorIs(t, msgframe.Check(b[:i]), msgframe.ErrPastEnd, "its first %d of %d bytes", i, len(b))
			}
			require.ErrorIs(t, msgframe.Check(b[:len(b)-1]), msgframe.ErrPastEnd, "all but its last byte")
		})
	}
}

// TestRefused: input whose framing claims more than it holds, or nests
// too deep, is refused.
func TestRefused(t *testing.T) {
	const tail = "0123456789"
	for name, c := range map[string]struct {
		in   string
		want error
	}{
		"empty":                        {"", msgframe.ErrPastEnd},
		"never used header":            {"\xc1", msgframe.ErrPastEnd},
		"bin32 of 2 GiB":               {"\xc6\x7f\xff\xff\xff" + tail, msgframe.ErrPastEnd},
		"str32 of 4 GiB":               {"\xdb\xff\xff\xff\xff" + tail, msgframe.ErrPastEnd},
		"ext32 of 4 GiB":               {"\xc9\xff\xff\xff\xff\x05" + tail, msgframe.ErrPastEnd},
		"array32 of 2^31 elements":     {"\xdd\x80\x00\x00\x00" + tail, msgframe.ErrPastEnd},
		"map32 of 2^31 pairs":          {"\xdf\x80\x00\x00\x00" + tail, msgframe.ErrPastEnd},
		"array in a map claiming more": {"\x81\xa1k\xdc\x00\x0b" + tail, msgframe.ErrPastEnd},
		"bin16 cut in its length":      {"\xc5\x01", msgframe.ErrPastEnd},
		"one level too deep":           {string(bytes.Repeat([]byte{0x91}, msgframe.MaxDepth+1)) + "\x00", msgframe.ErrTooDeep},
		"three million levels deep":    {string(bytes.Repeat([]byte{0x91}, 3<<20)) + "\x00", msgframe.ErrTooDeep},
		"deep in a wide map": {"\x82\xa1a\x00\xa1b" + string(bytes.Repeat([]byte{0x81, 0x00}, msgframe.MaxDepth+1)) + "\x00",
			msgframe.ErrTooDeep},
	} {
		t.Run(name, func(t *testing.T) {
			require.ErrorIs(t, msgframe.Check([]byte(c.in)), c.want)
		})
	}
}

func bigMap(n int) map[int]int {
	m := make(map[int]int, n)
	for i := range n {
		m[i] = i
	}
	return m
}

// nested returns arrays nested depth deep around a 0.
func nested(depth int) any {
	var v any = 0
	for range depth {
		v = []any{v}
	}
	return v
}

// TestCheckAll: values one after another to the last byte fit; a value
// followed by bytes that are not whole values, or that claim more than
// they hold, does not.
func TestCheckAll(t *testing.T) {
	var multi bytes.Buffer
	require.NoError(t, msgpack.NewEncoder(&multi).EncodeMulti("name", []byte("data"), map[string]any{"k": []int{1}}))
	for name, c := range map[string]struct {
		in   string
		want error
	}{
		"nothing":                     {"", nil},
		"one value":                   {"\x92\x01\xa1a", nil},
		"values one after another":    {multi.String(), nil},
		"a value, then a newline":     {"\xa1a\n", nil},
		"then a never used header":    {"\xa1a\xc1", msgframe.ErrPastEnd},
		"then a bin32 of 2 GiB":       {"\xa1a\xc6\x7f\xff\xff\xff0123456789", msgframe.ErrPastEnd},
		"then an array cut short":     {"\xa1a\x92\x01", msgframe.ErrPastEnd},
		"then arrays nested too deep": {"\xa1a" + strings.Repeat("\x91", msgframe.MaxDepth+1) + "\x00", msgframe.ErrTooDeep},
	} {
		t.Run(name, func(t *testing.T) {
			err := msgframe.CheckAll([]byte(c.in))
			if c.want == nil {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, c.want)
			}
		})
	}
}
