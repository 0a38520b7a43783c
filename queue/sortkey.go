package queue

import (
	"encoding/binary"
	"fmt"
	"math"
	"reflect"
	"time"
)

// SortKey is a type a sorted queue can order values by: any integer,
// float or string type (named ones too, such as a Priority int), or
// time.Time.
type SortKey interface {
	~int | ~int8 | ~int16 | ~int32 | ~int64 |
		~uint | ~uint8 | ~uint16 | ~uint32 | ~uint64 |
		~float32 | ~float64 | ~string | time.Time
}

// encodeSort returns k's bytes, in an encoding whose byte order is k's
// order: integers and times as 8 big-endian bytes (signed ones with the
// sign bit flipped), floats as their IEEE bits flipped so that negatives
// sort first, strings as they are.
func encodeSort[K SortKey](k K) ([]byte, error) {
	if t, ok := any(k).(time.Time); ok {
		return orderedInt(t.UnixNano()), nil
	}
	v := reflect.ValueOf(k)
	switch v.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return orderedInt(v.Int()), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return binary.BigEndian.AppendUint64(nil, v.Uint()), nil
	case reflect.Float32, reflect.Float64:
		f := v.Float()
		if math.IsNaN(f) {
			return nil, fmt.Errorf("%w: NaN sort key", ErrInvalidOptions)
		}
		bits := math.Float64bits(f)
		if f < 0 || (f == 0 && math.Signbit(f)) {
			bits = ^bits
		} else {
			bits |= 1 << 63
		}
		return binary.BigEndian.AppendUint64(nil, bits), nil
	default: // string kinds
		return []byte(v.String()), nil
	}
}

func orderedInt(i int64) []byte {
	return binary.BigEndian.AppendUint64(nil, uint64(i)^(1<<63))
}

// decodeSort is the inverse of encodeSort.
func decodeSort[K SortKey](b []byte) (K, error) {
	var k K
	if _, ok := any(k).(time.Time); ok {
		ns, err := orderedIntValue(b)
		return any(time.Unix(0, ns)).(K), err
	}
	v := reflect.ValueOf(&k).Elem()
	switch v.Kind() {
	case reflect.String:
		v.SetString(string(b))
		return k, nil
	}
	if len(b) != 8 {
		return k, fmt.Errorf("%w: sort key of %d bytes", ErrCorrupt, len(b))
	}
	u := binary.BigEndian.Uint64(b)
	switch v.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(u ^ 1<<63))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(u)
	default:
		if u&(1<<63) != 0 {
			u &^= 1 << 63
		} else {
			u = ^u
		}
		v.SetFloat(math.Float64frombits(u))
	}
	return k, nil
}

func orderedIntValue(b []byte) (int64, error) {
	if len(b) != 8 {
		return 0, fmt.Errorf("%w: time sort key of %d bytes", ErrCorrupt, len(b))
	}
	return int64(binary.BigEndian.Uint64(b) ^ 1<<63), nil
}
