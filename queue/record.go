package queue

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"slices"
	"unsafe"

	"github.com/vmihailenco/msgpack/v5"
)

// op is a record's kind. These values are part of the log format and must
// not be changed.
type op uint8

const (
	opEnqueue     op = 1  // a message: the record's LSN is its Seq
	opLease       op = 2  // a delivery: the record's LSN is the lease (receipt)
	opAck         op = 3  // the lease's consumer finished the message
	opNack        op = 4  // the lease's consumer gave it back, ready at Due
	opExtend      op = 5  // the lease's deadline moved to Due
	opExpire      op = 6  // the lease ran out (or its process died): ready again
	opDead        op = 7  // moved to the dead-letter set, with Reason
	opRequeueDead op = 8  // a dead letter made ready again
	opPurge       op = 9  // a dead letter removed for good
	opMove        op = 10 // a long-lived message copied forward: the record's LSN is its new Loc
	opClose       op = 11 // clean shutdown

	// Sorted queues.
	opPublish     op = 12 // a value: the record's LSN is its Seq
	opPull        op = 13 // a key's pending values leased as one batch: the LSN is the lease
	opBatchAck    op = 14 // the batch is done
	opBatchReturn op = 15 // the batch's values go back (nack, expiry, crash); Count is MaxDeliveries
	opBatchExtend op = 16 // the batch's deadline moved to Due
	opBatchDead   op = 17 // the batch's values go to the dead set
	opValueRevive op = 18 // a dead value made pending again
	opValuePurge  op = 19 // a dead value removed for good

	// Compaction and repair.
	opAdvance op = 20 // the cursor moves to Seq; with flagRecount, Enq and Due are the new pending count and bytes
	opDrop    op = 21 // a message (flagSorted: a value; with a Lease, of that batch) whose record was lost or is another's is forgotten

	// Salvage. An op above 21 is refused (ErrCorrupt) by releases before it:
	// a record that an older release would misread gets a new op, not a flag.
	// (A field an older release ignores may be added when its state check
	// refuses the record instead: a sorted move or drop with a Lease names a
	// value that release never finds pending or dead, "move of unknown
	// value", "drop of unknown value".)
	opMoveDead op = 22 // a cursor move whose message a salvage found dead-lettered through a lost lease

	// Added later; older releases refuse it as an unknown op: their plain
	// open fails (ErrCorrupt), their salvage skips it and the value is
	// pending again, to be pulled once more (doc.go).
	opValueDead op = 23 // a pending value that had MaxDeliveries goes to the dead set, with Reason

	lastOp = opValueDead
)

// recordFields is the number of fields in every record's msgpack array.
const recordFields = 15

// Record flags.
const (
	flagProducerID = 1 // an enqueue whose ID the producer chose: it takes part in dedup
	flagSorted     = 2 // a move or drop of a sorted queue's value
	flagCursor     = 4 // a move of a never-delivered message: Size is its enqueue record's size; its entry is Undelivered
	flagRecount    = 8 // an advance that resets the pending count

	// knownFlags are the flags this release knows; decode refuses a record
	// with any other bit, so that a later addition is not misread.
	knownFlags = flagProducerID | flagSorted | flagCursor | flagRecount
)

// record is one state change, stored in the log as a msgpack array:
//
//	[Op, Seq, Lease, ID, Flags, At, Due, Enq, Size, Count, Reason, Headers, Payload, Key, Sort]
//
// Fields a kind does not use are zero (one byte each). Every record sets
// At, the unix ns when it happened. Seq names a message (the LSN of its
// enqueue record) or a sorted value (of its publish record); Lease names
// a lease (the LSN of its lease or pull record). Times are unix ns. What
// each op keeps in each other field:
//
//	op            fields
//	enqueue       ID; Flags: flagProducerID; Due: deliver-at (0: now); Headers; Payload
//	lease         Seq; Due: deadline. A first delivery (from the cursor) also: ID;
//	              Enq: enqueue time; Size: bytes of the enqueue record
//	ack           Seq; Lease
//	nack          Seq; Lease; Due: ready-at (0: now)
//	extend        Seq; Lease; Due: the new deadline
//	expire        Seq; Lease
//	dead          Seq; Lease (0: not leased); Reason
//	requeue-dead  Seq
//	purge         Seq
//	move          Seq; ID; Enq: enqueue time; Count: deliveries so far (replay keeps the
//	              entry's); Headers; Payload
//	  flagCursor  a never-delivered message: Seq; ID; Enq; Size: bytes of its enqueue
//	              record; Headers; Payload. Its entry is Undelivered.
//	  flagSorted  a sorted value: Seq; Key; Sort; Enq: publish time; Payload; Lease: the
//	              leased batch that holds it (0: a pending or dead value)
//	close         -
//	publish       Key; Sort; Payload
//	pull          Key; Due: deadline
//	batch-ack     Lease; Key; Payload: the batch's value Seqs (record_seqs.go). A
//	              record from before them: Lease only
//	batch-return  Lease; Due: ready-at (0: now); Count: MaxDeliveries (maxDeliveries, 0:
//	              no limit); Reason: for the values that reach it
//	batch-extend  Lease; Due: the new deadline
//	batch-dead    Lease; Reason; Key; Payload: as batch-ack
//	value-revive  Seq
//	value-purge   Seq
//	advance       Seq: the new cursor. flagRecount: Enq, Due: the never-delivered
//	              messages from it on and their bytes (pendingCount)
//	drop          Seq; Reason. flagSorted: also Key; Sort
//	move-dead     as a move with flagCursor, written by a salvage: a message that a
//	              dead-letter record sent to the dead set though the lease it names was
//	              lost; Reason: that record's; Count: 1. Its entry is Dead.
//	value-dead    Seq; Key; Sort; Reason: a pending value that had MaxDeliveries, which a
//	              pull would have delivered again, goes to the dead set
type record struct {
	Op      op                // what happened
	Seq     uint64            // the message (LSN of its enqueue record); 0 in an enqueue
	Lease   uint64            // the lease the change applies to
	ID      string            // message id (enqueue, lease from the cursor, move)
	Flags   uint8             // flagProducerID
	At      int64             // unix ns when it happened
	Due     int64             // unix ns: deliver-at (enqueue, nack), deadline (lease, extend); advance: bytes
	Enq     int64             // unix ns of the enqueue (lease from the cursor, move); advance: a count
	Size    uint32            // bytes of the message's enqueue record (lease from the cursor, cursor move)
	Count   uint32            // deliveries so far (move); batch-return: MaxDeliveries
	Reason  string            // dead-letter reason
	Headers map[string]string // message headers (enqueue, move)
	Payload []byte            // message payload (enqueue, move)
	Key     string            // sorted queue: the message key
	Sort    []byte            // sorted queue: the encoded sort key
}

// pendingCount returns what an advance with flagRecount resets the
// never-delivered count to: messages and their bytes, kept in Enq and Due.
func (r *record) pendingCount() (n, bytes int64) { return r.Enq, r.Due }

// setPendingCount makes an advance reset the never-delivered count.
func (r *record) setPendingCount(n, bytes int64) {
	r.Flags |= flagRecount
	r.Enq, r.Due = n, bytes
}

// maxDeliveries returns a batch-return's delivery limit, kept in Count:
// values delivered as often go to the dead set (0: no limit).
func (r *record) maxDeliveries() uint32 { return r.Count }

// encodeRecord appends the msgpack form of r to dst. It writes msgpack
// directly, as vmihailenco/msgpack's Encoder would (smallest integer
// form, str for strings, bin for byte strings, nil for a nil map or
// slice), without an encoder or an intermediate buffer.
func encodeRecord(dst []byte, r *record) []byte {
	dst = appendHead(slices.Grow(dst, maxEncodedSize(r)), r)
	dst = appendBytes(dst, r.Payload)
	dst = appendString(dst, r.Key)
	return appendBytes(dst, r.Sort)
}

// encodeAround is encodeRecord without the bytes of r.Payload: out[:at],
// r.Payload, then out[at:] are encodeRecord's bytes. A record with a
// large payload is handed to the log in those three parts
// (wal.Log.AppendJoined), which copies the payload into its group from the
// caller's slice: encoded whole first, it would be copied twice.
func encodeAround(dst []byte, r *record) (out []byte, at int) {
	dst = appendHead(slices.Grow(dst, maxEncodedSize(r)-len(r.Payload)), r)
	if r.Payload == nil {
		dst = append(dst, mpNil)
	} else {
		dst = appendLen(dst, len(r.Payload), 0, 0, mpBin8)
	}
	at = len(dst)
	dst = appendString(dst, r.Key)
	return appendBytes(dst, r.Sort), at
}

// appendHead appends the msgpack array header of a record and its
// fields before the payload.
func appendHead(dst []byte, r *record) []byte {
	dst = append(dst, mpFixArray|recordFields)
	dst = appendUint(dst, uint64(r.Op))
	dst = appendUint(dst, r.Seq)
	dst = appendUint(dst, r.Lease)
	dst = appendString(dst, r.ID)
	dst = appendUint(dst, uint64(r.Flags))
	dst = appendInt(dst, r.At)
	dst = appendInt(dst, r.Due)
	dst = appendInt(dst, r.Enq)
	dst = appendUint(dst, uint64(r.Size))
	dst = appendUint(dst, uint64(r.Count))
	dst = appendString(dst, r.Reason)
	return appendHeaders(dst, r.Headers)
}

// maxEncodedSize bounds the bytes encodeRecord writes for r: at most nine
// per number, five per length.
func maxEncodedSize(r *record) int {
	n := 1 + 10*9 + 6*5 + len(r.ID) + len(r.Reason) + len(r.Payload) + len(r.Key) + len(r.Sort)
	if len(r.Headers) == 0 { // a range over no map still starts an iterator
		return n
	}
	for k, v := range r.Headers {
		n += 10 + len(k) + len(v)
	}
	return n
}

// msgpack type codes used by the record encoder.
const (
	mpFixArray = 0x90
	mpFixMap   = 0x80
	mpFixStr   = 0xa0
	mpNil      = 0xc0
	mpFalse    = 0xc2
	mpTrue     = 0xc3
	mpBin8     = 0xc4
	mpUint8    = 0xcc
	mpInt8     = 0xd0
	mpStr8     = 0xd9
	mpMap16    = 0xde
)

// appendUint appends n as a positive fixint or uint8/16/32/64.
func appendUint(dst []byte, n uint64) []byte {
	switch {
	case n <= math.MaxInt8:
		return append(dst, byte(n))
	case n <= math.MaxUint8:
		return append(dst, mpUint8, byte(n))
	case n <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(dst, mpUint8+1), uint16(n))
	case n <= math.MaxUint32:
		return binary.BigEndian.AppendUint32(append(dst, mpUint8+2), uint32(n))
	}
	return binary.BigEndian.AppendUint64(append(dst, mpUint8+3), n)
}

// appendInt appends n as appendUint does when n >= 0, else as a negative
// fixint or int8/16/32/64. (A positive fixint, such as the zero of a time
// not set, is appended inline; the rest in appendIntWide.)
func appendInt(dst []byte, n int64) []byte {
	if uint64(n) <= math.MaxInt8 {
		return append(dst, byte(n))
	}
	return appendIntWide(dst, n)
}

func appendIntWide(dst []byte, n int64) []byte {
	switch {
	case n >= 0:
		return appendUint(dst, uint64(n))
	case n >= -32:
		return append(dst, byte(n))
	case n >= math.MinInt8:
		return append(dst, mpInt8, byte(n))
	case n >= math.MinInt16:
		return binary.BigEndian.AppendUint16(append(dst, mpInt8+1), uint16(n))
	case n >= math.MinInt32:
		return binary.BigEndian.AppendUint32(append(dst, mpInt8+2), uint32(n))
	}
	return binary.BigEndian.AppendUint64(append(dst, mpInt8+3), uint64(n))
}

// appendLen appends a length with a fix code (for lengths below fixMax),
// else with the 8/16/32-bit code sequence starting at code8 (code8 0 for
// none: maps).
func appendLen(dst []byte, n int, fix byte, fixMax int, code8 byte) []byte {
	switch {
	case n < fixMax:
		return append(dst, fix|byte(n))
	case code8 != 0 && n <= math.MaxUint8:
		return append(dst, code8, byte(n))
	}
	if code8 == 0 {
		code8 = mpMap16 - 1
	}
	if n <= math.MaxUint16 {
		return binary.BigEndian.AppendUint16(append(dst, code8+1), uint16(n))
	}
	return binary.BigEndian.AppendUint32(append(dst, code8+2), uint32(n))
}

func appendString(dst []byte, s string) []byte {
	return append(appendLen(dst, len(s), mpFixStr, 32, mpStr8), s...)
}

func appendBytes(dst, b []byte) []byte {
	if b == nil {
		return append(dst, mpNil)
	}
	return append(appendLen(dst, len(b), 0, 0, mpBin8), b...)
}

// appendHeaders appends h; a nil map (most records) inline, the rest by
// appendHeaderMap.
func appendHeaders(dst []byte, h map[string]string) []byte {
	if h == nil {
		return append(dst, mpNil)
	}
	return appendHeaderMap(dst, h)
}

func appendHeaderMap(dst []byte, h map[string]string) []byte {
	dst = appendLen(dst, len(h), mpFixMap, 16, 0)
	for k, v := range h {
		dst = appendString(appendString(dst, k), v)
	}
	return dst
}

// decodeRecord parses b, the msgpack form of a record. A record in the
// form encodeRecord writes (the same bytes vmihailenco's encoder wrote) is
// read straight from b by decodeEncoded; any other msgpack form, and any
// damage, goes through the msgpack decoder (decodeMsgpack), which says
// what is wrong.
func decodeRecord(b []byte, r *record) error {
	if decodeEncoded(b, r) {
		return checkKind(r)
	}
	*r = record{}
	return decodeMsgpack(b, r)
}

// decodeRecordAliased is decodeRecord whose r.Payload and r.Sort may be
// views into b (decodeEncodedAliased): valid only as long as b is.
func decodeRecordAliased(b []byte, r *record) error {
	if decodeEncodedAliased(b, r) {
		return checkKind(r)
	}
	*r = record{}
	return decodeMsgpack(b, r)
}

// decodeRecordAliasedID is decodeRecordAliased that leaves r.ID "" and
// returns the ID's bytes instead, a view into b (decodeEncodedAliasedID),
// valid only as long as b is. A record in another msgpack form goes
// through the msgpack decoder, which sets r.ID and returns no view.
func decodeRecordAliasedID(b []byte, r *record) (id []byte, err error) {
	if id, ok := decodeEncodedAliasedID(b, r); ok {
		r.ID = ""
		return id, checkKind(r)
	}
	*r = record{}
	return nil, decodeMsgpack(b, r)
}

// decodeMsgpack is decodeRecord through the msgpack decoder.
func decodeMsgpack(b []byte, r *record) error {
	dec := msgpack.GetDecoder()
	defer msgpack.PutDecoder(dec)
	in := bytes.NewReader(b) // an io.ByteScanner: the decoder reads it directly, unbuffered
	dec.Reset(in)
	n, err := dec.DecodeArrayLen()
	if err != nil {
		return fmt.Errorf("%w: record header: %v", ErrCorrupt, err)
	}
	if n != recordFields {
		return fmt.Errorf("%w: record has %d fields, want %d", ErrCorrupt, n, recordFields)
	}
	if err := decodeFields(dec, in.Len, r); err != nil {
		return fmt.Errorf("%w: record: %v", ErrCorrupt, err)
	}
	return checkKind(r)
}

// checkKind refuses a record of an op or with a flag this release does
// not know, and a batch settle whose packed value Seqs do not decode.
func checkKind(r *record) error {
	if r.Flags&^knownFlags != 0 {
		return fmt.Errorf("%w: unknown record flags %#x", ErrCorrupt, r.Flags&^knownFlags)
	}
	if (r.Op == opBatchAck || r.Op == opBatchDead) && len(r.Payload) > 0 {
		if err := checkBatchSeqs(r.Payload, r.Lease); err != nil {
			return fmt.Errorf("%w: %v", ErrCorrupt, err)
		}
	}
	return checkOp(r.Op)
}

func checkOp(o op) error {
	if o < opEnqueue || o > lastOp {
		return fmt.Errorf("%w: unknown record op %d", ErrCorrupt, o)
	}
	return nil
}

func decodeFields(dec *msgpack.Decoder, left func() int, r *record) error {
	d := fieldReader{dec: dec, left: left}
	o := d.uint(255)
	r.Seq = d.uint(1<<64 - 1)
	r.Lease = d.uint(1<<64 - 1)
	r.ID = d.string()
	flags := d.uint(255)
	r.At, r.Due, r.Enq = d.int(), d.int(), d.int()
	size, count := d.uint(1<<32-1), d.uint(1<<32-1)
	r.Reason = d.string()
	r.Headers = d.headers()
	r.Payload = d.bytes()
	r.Key = d.string()
	r.Sort = d.bytes()
	r.Op, r.Flags, r.Size, r.Count = op(o), uint8(flags), uint32(size), uint32(count)
	return d.err
}

// fieldReader decodes fields in order and keeps the first error.
type fieldReader struct {
	dec  *msgpack.Decoder
	left func() int // bytes of the input not read yet
	err  error      // first error; later reads are skipped
}

// bytes decodes a byte string no longer than the input left: msgpack
// v5.4.1's DecodeBytes allocates whatever length the input claims (up to
// 4 GiB) before reading a byte of it. The decoder reads the input
// directly (it is an io.ByteScanner), so the bytes are read from there.
func (d *fieldReader) bytes() []byte {
	if d.err != nil {
		return nil
	}
	n, err := d.dec.DecodeBytesLen()
	if err == nil && n > d.left() {
		err = fmt.Errorf("byte string of %d bytes with %d left", n, d.left())
	}
	if err != nil || n < 0 {
		d.err = err
		return nil
	}
	b := make([]byte, n)
	_, d.err = io.ReadFull(d.dec.Buffered(), b)
	return b
}

func (d *fieldReader) uint(max uint64) uint64 {
	if d.err != nil {
		return 0
	}
	v, err := d.dec.DecodeUint64()
	if err == nil && v > max {
		err = fmt.Errorf("field value %d out of range", v)
	}
	d.err = err
	return v
}

func (d *fieldReader) int() int64 {
	if d.err != nil {
		return 0
	}
	v, err := d.dec.DecodeInt64()
	d.err = err
	return v
}

// string decodes a string no longer than the input left (see bytes; for
// strings msgpack allocates in chunks, but a lying length still costs
// megabytes).
func (d *fieldReader) string() string {
	b := d.bytes()
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b)) // b is new and never written again
}

func (d *fieldReader) headers() map[string]string {
	if d.err != nil {
		return nil
	}
	n, err := d.dec.DecodeMapLen()
	if err != nil || n <= 0 {
		d.err = err
		return nil
	}
	h := make(map[string]string, min(n, 64))
	for i := 0; i < n && d.err == nil; i++ {
		k := d.string()
		h[k] = d.string()
	}
	return h
}

// peekOp returns the op of an encoded record without decoding it, or 0.
func peekOp(b []byte) op {
	if len(b) < 2 || b[0] != 0x90|recordFields || b[1] > 0x7f {
		return 0
	}
	return op(b[1])
}
