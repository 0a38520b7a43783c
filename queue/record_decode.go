package queue

import "encoding/binary"

// decodeMode is what decodeFrom copies out of its input and what it
// leaves there, as views valid only as long as the input is.
type decodeMode uint8

const (
	decodeCopy    decodeMode = iota // every field is the record's own
	decodeAlias                     // Payload and Sort are views
	decodeAliasID                   // as decodeAlias; r.ID is left "", the ID's bytes returned as a view
)

// decodeEncoded reads a record in the form encodeRecord writes, straight
// from b: the same fields, the same values and the same nil-or-empty
// distinctions as the msgpack decoder, without a decoder, a reader or an
// error per field. It reports false, leaving r partly filled, for any byte
// it does not expect; the caller then decodes b with the msgpack decoder.
func decodeEncoded(b []byte, r *record) bool {
	_, ok := decodeFrom(b, r, decodeCopy)
	return ok
}

// decodeEncodedAliased is decodeEncoded whose r.Payload and r.Sort are
// views into b instead of copies: they are valid only as long as b is,
// and must not be written. A non-empty view has no room to grow (its
// capacity is its length).
func decodeEncodedAliased(b []byte, r *record) bool {
	_, ok := decodeFrom(b, r, decodeAlias)
	return ok
}

// decodeEncodedAliasedID is decodeEncodedAliased that does not make the
// record's ID a string: it leaves r.ID "" and returns the ID's bytes, a
// view into b (empty for an empty ID), for the caller to make a string of
// only if it keeps it. A replay keeps the ID of few records: making a
// string of every message's ID was one allocation per record replayed.
func decodeEncodedAliasedID(b []byte, r *record) (id []byte, ok bool) {
	return decodeFrom(b, r, decodeAliasID)
}

// decodeFrom is decodeEncoded, decodeEncodedAliased or
// decodeEncodedAliasedID, as mode says; id is the ID's bytes in b, which
// r.ID holds a copy of unless mode is decodeAliasID.
// Its list of fields is decodeFields' (record.go) written out again: read
// through one generic function shared with it, the aliased decode of an
// enqueue record makes a second allocation and ran slower in
// BenchmarkRecordCodec (203-409 ns against 97-159 ns, interleaved runs on a
// shared machine). FuzzDecodeRecord holds the two decoders to
// the same records.
func decodeFrom(b []byte, r *record, mode decodeMode) (id []byte, ok bool) {
	if len(b) == 0 || b[0] != mpFixArray|recordFields {
		return nil, false
	}
	d := encodedReader{b: b, at: 1, ok: true, alias: mode != decodeCopy}
	o := d.uint(255)
	r.Seq = d.uint(1<<64 - 1)
	r.Lease = d.uint(1<<64 - 1)
	id = d.str()
	if mode != decodeAliasID {
		r.ID = string(id)
	}
	flags := d.uint(255)
	r.At, r.Due, r.Enq = d.int(), d.int(), d.int()
	size, count := d.uint(1<<32-1), d.uint(1<<32-1)
	r.Reason = d.string()
	r.Headers = d.headers()
	r.Payload = d.bytes()
	r.Key = d.string()
	r.Sort = d.bytes()
	r.Op, r.Flags, r.Size, r.Count = op(o), uint8(flags), uint32(size), uint32(count)
	return id, d.ok
}

// encodedReader reads the fields of an encoded record in order; ok turns
// false at the first unexpected byte (fail), and later reads return zero
// values.
// It moves through b by an offset rather than by reslicing b: a pointer
// written through the reader would cost a write barrier per field while
// the collector runs.
type encodedReader struct {
	b     []byte // the input
	at    int    // offset in b of the next byte to read
	ok    bool
	alias bool // bytes returns views into b instead of copies
}

// fail marks the input unreadable: ok turns false and the offset moves
// to the end, so that every later read finds nothing and returns zero
// (the inline reads need not look at ok).
func (d *encodedReader) fail() { d.ok, d.at = false, len(d.b) }

// left is the number of bytes not read yet.
func (d *encodedReader) left() int { return len(d.b) - d.at }

// take returns the next n bytes, or nil and not ok.
func (d *encodedReader) take(n int) []byte {
	if !d.ok || n > d.left() {
		d.fail()
		return nil
	}
	v := d.b[d.at : d.at+n : d.at+n]
	d.at += n
	return v
}

// code returns the next type code, or 0 and not ok.
func (d *encodedReader) code() byte {
	if v := d.take(1); v != nil {
		return v[0]
	}
	return 0
}

// bigEndian reads an n-byte (1, 2, 4 or 8) big-endian number.
func (d *encodedReader) bigEndian(n int) uint64 {
	v := d.take(n)
	switch len(v) {
	case 1:
		return uint64(v[0])
	case 2:
		return uint64(binary.BigEndian.Uint16(v))
	case 4:
		return uint64(binary.BigEndian.Uint32(v))
	case 8:
		return binary.BigEndian.Uint64(v)
	}
	return 0
}

// uint reads a positive fixint or uint8/16/32/64 no larger than max. A
// fixint within max (most fields of most records: an op, a zero) is read
// by the first test; anything else by uintSlow.
func (d *encodedReader) uint(max uint64) uint64 {
	if at := d.at; at < len(d.b) && d.b[at] <= 0x7f && uint64(d.b[at]) <= max {
		d.at++
		return uint64(d.b[at])
	}
	return d.uintSlow(max)
}

// uintSlow is uint for any form.
func (d *encodedReader) uintSlow(max uint64) uint64 {
	c := d.code()
	var v uint64
	switch {
	case !d.ok:
		return 0
	case c <= 0x7f:
		v = uint64(c)
	case c >= mpUint8 && c <= mpUint8+3:
		v = d.bigEndian(1 << (c - mpUint8))
	default:
		d.fail()
	}
	if v > max {
		d.fail()
	}
	return v
}

// int reads what uint reads, or a negative fixint or int8/16/32/64. A
// positive fixint (a time not set) and a uint64 (a time) are read by the
// first tests, anything else by intSlow.
func (d *encodedReader) int() int64 {
	if at := d.at; uint(at) < uint(len(d.b)) {
		switch c := d.b[at]; {
		case c <= 0x7f:
			d.at = at + 1
			return int64(c)
		case c == mpUint8+3 && len(d.b)-at >= 9:
			d.at = at + 9
			return int64(binary.BigEndian.Uint64(d.b[at+1:]))
		}
	}
	return d.intSlow()
}

// intSlow is int for any form.
func (d *encodedReader) intSlow() int64 {
	if !d.ok || d.left() == 0 {
		d.fail()
		return 0
	}
	switch c := d.b[d.at]; {
	case c == mpUint8+3 && d.left() >= 9: // a time: read here, not by uint
		v := binary.BigEndian.Uint64(d.b[d.at+1:])
		d.at += 9
		return int64(v)
	case c >= 0xe0:
		d.at++
		return int64(int8(c))
	case c >= mpInt8 && c <= mpInt8+3:
		d.at++
		n := 1 << (c - mpInt8)
		v := d.bigEndian(n)
		shift := 64 - 8*n
		return int64(v<<shift) >> shift
	}
	return int64(d.uint(1<<64 - 1))
}

// raw reads a str or bin (or nil) and returns its bytes within the input;
// isNil reports a nil.
func (d *encodedReader) raw() (v []byte, isNil bool) {
	c := d.code()
	var n uint64
	switch {
	case !d.ok:
		return nil, false
	case c == mpNil:
		return nil, true
	case c >= mpFixStr && c <= mpFixStr|31:
		n = uint64(c & 31)
	case c >= mpStr8 && c <= mpStr8+2:
		n = d.bigEndian(1 << (c - mpStr8))
	case c >= mpBin8 && c <= mpBin8+2:
		n = d.bigEndian(1 << (c - mpBin8))
	default:
		d.fail()
		return nil, false
	}
	if n > uint64(d.left()) {
		d.fail()
		return nil, false
	}
	return d.take(int(n)), false
}

// bytes reads a byte string into a new slice (a view into the input when
// d.alias is set): nil for a nil, empty (not nil) for an empty one, as the
// msgpack decoder does.
func (d *encodedReader) bytes() []byte {
	if at := d.at; uint(at) < uint(len(d.b)) && d.b[at] == mpNil {
		d.at++ // the most common case, read inline
		return nil
	}
	v, isNil := d.raw()
	switch {
	case isNil || !d.ok:
		return nil
	case len(v) == 0:
		return []byte{} // not a view: an empty one would still hold the input
	case d.alias:
		return v
	}
	b := make([]byte, len(v))
	copy(b, v)
	return b
}

// string reads a str (or nil, as "") into a new string.
func (d *encodedReader) string() string { return string(d.str()) }

// str reads a str (or nil) and returns its bytes within the input: none
// for an empty one or a nil. The empty fixstr (most strings of most
// records) is read inline.
func (d *encodedReader) str() []byte {
	if at := d.at; uint(at) < uint(len(d.b)) && d.b[at] == mpFixStr {
		d.at++
		return nil
	}
	v, _ := d.raw()
	return v
}

// headers reads a map of strings; nil when nil or empty.
func (d *encodedReader) headers() map[string]string {
	c := d.code()
	var n uint64
	switch {
	case !d.ok || c == mpNil:
		return nil
	case c >= mpFixMap && c <= mpFixMap|15:
		n = uint64(c & 15)
	case c == mpMap16 || c == mpMap16+1:
		n = d.bigEndian(2 << (c - mpMap16))
	default:
		d.fail()
		return nil
	}
	if n == 0 || !d.ok {
		return nil
	}
	if n > uint64(d.left()) { // every entry takes at least two bytes
		d.fail()
		return nil
	}
	h := make(map[string]string, min(n, 64))
	for i := uint64(0); i < n && d.ok; i++ {
		k := d.string()
		h[k] = d.string()
	}
	return h
}
