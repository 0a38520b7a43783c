// Package msgframe checks the framing of a msgpack value before it is
// decoded, for the embedded queue's typed views (package queue) and the
// Redis backend's stored records (redisq).
//
// msgpack v5.4.1 allocates the length a bin header, or the element count
// an array header, announces before it reads a byte of what follows: a
// payload of a few bytes claiming a bin32 of 2 GiB costs 2 GiB to decode,
// and a payload of arrays nested a few million deep exhausts the
// goroutine's stack, a fatal error. Check refuses both in one pass over
// the bytes, allocating no more than MaxDepth counters: every string,
// binary or extension must fit in the bytes after its header, every array
// or map must claim no more values than there are bytes left (each takes
// one at least), and no value may nest deeper than MaxDepth. A value that
// passes is then decoded by msgpack with allocations bounded by its length
// times the size of the largest element type it is decoded into.
//
// Check looks at the first value only, as msgpack.Unmarshal decodes it.
// CheckAll checks every value to the last byte, for a decoder that may
// read more values than the headers count (a type's own CustomDecoder).
// Neither looks inside the bytes of an extension: what its decoder reads
// from them is its own.
//
// Check and CheckAll are pure functions, safe for concurrent use.
package msgframe
