package redisq

import (
	"bytes"
	"fmt"
	"reflect"
	"time"

	"github.com/walq/walq/internal/sortkey"
	"github.com/walq/walq/queue"
)

// sortPart returns k's bytes in the embedded queue's order-keeping
// encoding (internal/sortkey), strings escaped so that the part delimits
// itself inside a Redis member and keeps its order: 00 becomes 00 FF and
// the part ends with 00 01. Every other kind has 8 bytes.
func sortPart[K queue.SortKey](k K) ([]byte, error) {
	b, err := sortkey.Encode(k)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", queue.ErrInvalidOptions, err)
	}
	if !sortkey.IsString[K]() {
		return b, nil
	}
	return append(bytes.ReplaceAll(b, []byte{0}, []byte{0, 0xff}), 0, 1), nil
}

// isFixed says whether K's sort parts have 8 bytes.
func isFixed[K queue.SortKey]() bool { return !sortkey.IsString[K]() }

// fromSortPart is the inverse of sortPart.
func fromSortPart[K queue.SortKey](b []byte) (K, error) {
	if sortkey.IsString[K]() {
		if len(b) < 2 {
			var k K
			return k, fmt.Errorf("%w: redisq: string sort key without its end", queue.ErrCorrupt)
		}
		b = bytes.ReplaceAll(b[:len(b)-2], []byte{0, 0xff}, []byte{0})
	}
	k, err := sortkey.Decode[K](b)
	if err != nil {
		return k, fmt.Errorf("%w: redisq: sort key of %d bytes", queue.ErrCorrupt, len(b))
	}
	return k, nil
}

// sortKind names the encoding family of K's sort parts: handles whose
// kinds differ read each other's sort parts as other keys.
func sortKind[K queue.SortKey]() string {
	var k K
	if _, ok := any(k).(time.Time); ok {
		return "time"
	}
	switch reflect.ValueOf(k).Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "int"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "uint"
	case reflect.Float32, reflect.Float64:
		return "float"
	}
	return "string"
}
