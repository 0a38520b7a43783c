package queue

import (
	"fmt"
	"time"

	"github.com/walq/walq/internal/sortkey"
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
// order (internal/sortkey, shared with the Redis backend).
func encodeSort[K SortKey](k K) ([]byte, error) {
	b, err := sortkey.Encode(k)
	if err != nil {
		return nil, fmt.Errorf("%w: %v (%v)", ErrInvalidOptions, err, any(k))
	}
	return b, nil
}

// minTimeKey and maxTimeKey bound a time.Time sort key: it is kept as
// nanoseconds since 1970 in an int64 (the years 1678 to 2262).
var (
	minTimeKey = sortkey.MinTime
	maxTimeKey = sortkey.MaxTime
)

func orderedInt(i int64) []byte { return sortkey.OrderedInt(i) }

// decodeSort is the inverse of encodeSort.
func decodeSort[K SortKey](b []byte) (K, error) {
	k, err := sortkey.Decode[K](b)
	if err != nil {
		return k, fmt.Errorf("%w: sort key of %d bytes", ErrCorrupt, len(b))
	}
	return k, nil
}

func orderedIntValue(b []byte) (int64, error) {
	v, err := sortkey.OrderedIntValue(b)
	if err != nil {
		return 0, fmt.Errorf("%w: time sort key of %d bytes", ErrCorrupt, len(b))
	}
	return v, nil
}
