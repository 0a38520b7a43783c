package redisq

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"reflect"
	"time"

	"github.com/walq/walq/queue"
)

// sortPart returns k's bytes in an encoding whose byte order is k's order,
// the embedded queue's: integers and times as 8 big-endian bytes (signed
// ones with the sign bit flipped), floats as their IEEE bits flipped so
// that negatives sort first. Strings are their bytes with 00 escaped as
// 00 FF and ended by 00 01, so that the part delimits itself inside a
// Redis member and keeps its order. fixed says which form it is.
func sortPart[K queue.SortKey](k K) (part []byte, fixed bool, err error) {
	if t, ok := any(k).(time.Time); ok {
		return orderedInt(t.UnixNano()), true, nil
	}
	v := reflect.ValueOf(k)
	switch v.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return orderedInt(v.Int()), true, nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return binary.BigEndian.AppendUint64(nil, v.Uint()), true, nil
	case reflect.Float32, reflect.Float64:
		f := v.Float()
		if math.IsNaN(f) {
			return nil, true, fmt.Errorf("%w: NaN sort key", queue.ErrInvalidOptions)
		}
		bits := math.Float64bits(f)
		if f < 0 || (f == 0 && math.Signbit(f)) {
			bits = ^bits
		} else {
			bits |= 1 << 63
		}
		return binary.BigEndian.AppendUint64(nil, bits), true, nil
	default: // string kinds
		s := bytes.ReplaceAll([]byte(v.String()), []byte{0}, []byte{0, 0xff})
		return append(s, 0, 1), false, nil
	}
}

func orderedInt(i int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(i)^(1<<63)) }

// isFixed says whether K's sort parts have 8 bytes.
func isFixed[K queue.SortKey]() bool {
	var k K
	_, fixed, _ := sortPart(k)
	return fixed
}

// fromSortPart is the inverse of sortPart.
func fromSortPart[K queue.SortKey](b []byte) (K, error) {
	var k K
	if _, ok := any(k).(time.Time); ok {
		if len(b) != 8 {
			return k, fmt.Errorf("redisq: sort key of %d bytes", len(b))
		}
		return any(time.Unix(0, int64(binary.BigEndian.Uint64(b)^(1<<63)))).(K), nil
	}
	v := reflect.ValueOf(&k).Elem()
	if v.Kind() == reflect.String {
		if len(b) < 2 {
			return k, fmt.Errorf("redisq: string sort key without its end")
		}
		v.SetString(string(bytes.ReplaceAll(b[:len(b)-2], []byte{0, 0xff}, []byte{0})))
		return k, nil
	}
	if len(b) != 8 {
		return k, fmt.Errorf("redisq: sort key of %d bytes", len(b))
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
