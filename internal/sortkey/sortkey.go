// Package sortkey encodes the sort keys of sorted queues as bytes whose
// order is the keys' order, for the embedded queue (package queue) and
// the Redis backend (redisq), so that both order values alike: integers
// and times as 8 big-endian bytes (signed ones with the sign bit flipped),
// floats as their IEEE bits flipped so that negatives sort first, strings
// as they are. These encodings are part of the on-disk and in-server
// formats and must not change.
//
// The functions are pure and safe for concurrent use.
package sortkey

import (
	"encoding/binary"
	"errors"
	"math"
	"reflect"
	"time"
)

// Key is the constraint of queue.SortKey: any integer, float or string
// type (named ones too), or time.Time.
type Key interface {
	~int | ~int8 | ~int16 | ~int32 | ~int64 |
		~uint | ~uint8 | ~uint16 | ~uint32 | ~uint64 |
		~float32 | ~float64 | ~string | time.Time
}

var (
	// ErrNaN is returned by Encode for a NaN float: it has no order.
	ErrNaN = errors.New("NaN sort key")
	// ErrLength is returned by Decode when a fixed-size key is not 8 bytes.
	ErrLength = errors.New("sort key is not 8 bytes")
	// ErrTimeRange is returned by Encode for a time outside MinTime to
	// MaxTime (such as the zero time): its UnixNano would wrap into
	// another time, at another place in the order.
	ErrTimeRange = errors.New("time sort key outside the years 1678 to 2262")
)

// MinTime and MaxTime bound a time.Time key: it is kept as nanoseconds
// since 1970 in an int64, which holds the years 1678 to 2262.
var (
	MinTime = time.Unix(0, math.MinInt64).UTC()
	MaxTime = time.Unix(0, math.MaxInt64).UTC()
)

// Encode returns k's bytes in an encoding whose byte order is k's order.
// It refuses a NaN (ErrNaN) and a time outside MinTime to MaxTime
// (ErrTimeRange).
func Encode[K Key](k K) ([]byte, error) {
	if t, ok := any(k).(time.Time); ok {
		if t.Before(MinTime) || t.After(MaxTime) {
			return nil, ErrTimeRange
		}
		return OrderedInt(t.UnixNano()), nil
	}
	v := reflect.ValueOf(k)
	switch v.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return OrderedInt(v.Int()), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return binary.BigEndian.AppendUint64(nil, v.Uint()), nil
	case reflect.Float32, reflect.Float64:
		f := v.Float()
		if math.IsNaN(f) {
			return nil, ErrNaN
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

// IsString says whether K is a string kind, whose encoding has any length;
// every other kind's has 8 bytes.
func IsString[K Key]() bool {
	var k K
	if _, ok := any(k).(time.Time); ok {
		return false
	}
	return reflect.ValueOf(k).Kind() == reflect.String
}

// OrderedInt encodes i as 8 big-endian bytes with the sign bit flipped.
func OrderedInt(i int64) []byte {
	return binary.BigEndian.AppendUint64(nil, uint64(i)^(1<<63))
}

// OrderedIntValue is the inverse of OrderedInt.
func OrderedIntValue(b []byte) (int64, error) {
	if len(b) != 8 {
		return 0, ErrLength
	}
	return int64(binary.BigEndian.Uint64(b) ^ 1<<63), nil
}

// Decode is the inverse of Encode.
func Decode[K Key](b []byte) (K, error) {
	var k K
	if _, ok := any(k).(time.Time); ok {
		ns, err := OrderedIntValue(b)
		return any(time.Unix(0, ns)).(K), err
	}
	v := reflect.ValueOf(&k).Elem()
	if v.Kind() == reflect.String {
		v.SetString(string(b))
		return k, nil
	}
	if len(b) != 8 {
		return k, ErrLength
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
