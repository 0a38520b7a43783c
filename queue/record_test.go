package queue

import (
	"bytes"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"
)

// msgpackRecord encodes r with vmihailenco/msgpack's Encoder, the way
// records were written before encodeRecord wrote msgpack itself.
func msgpackRecord(t *testing.T, r *record) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	require.NoError(t, enc.EncodeArrayLen(recordFields))
	for _, u := range []uint64{uint64(r.Op), r.Seq, r.Lease} {
		require.NoError(t, enc.EncodeUint(u))
	}
	require.NoError(t, enc.EncodeString(r.ID))
	require.NoError(t, enc.EncodeUint(uint64(r.Flags)))
	for _, i := range []int64{r.At, r.Due, r.Enq} {
		require.NoError(t, enc.EncodeInt(i))
	}
	require.NoError(t, enc.EncodeUint(uint64(r.Size)))
	require.NoError(t, enc.EncodeUint(uint64(r.Count)))
	require.NoError(t, enc.EncodeString(r.Reason))
	if r.Headers == nil {
		require.NoError(t, enc.EncodeNil())
	} else {
		require.NoError(t, enc.EncodeMapLen(len(r.Headers)))
		for k, v := range r.Headers { // at most one header: the order is fixed
			require.NoError(t, enc.EncodeString(k))
			require.NoError(t, enc.EncodeString(v))
		}
	}
	require.NoError(t, enc.EncodeBytes(r.Payload))
	require.NoError(t, enc.EncodeString(r.Key))
	require.NoError(t, enc.EncodeBytes(r.Sort))
	return buf.Bytes()
}

// TestEncodeRecordMatchesMsgpack checks that encodeRecord writes the bytes
// msgpack's Encoder writes, at every integer and length boundary, so that
// logs written before and after decode alike; and that encodeAround's
// parts around the payload join into the same bytes.
func TestEncodeRecordMatchesMsgpack(t *testing.T) {
	uints := []uint64{0, 1, 127, 128, 255, 256, 65535, 65536, math.MaxUint32, math.MaxUint32 + 1, math.MaxUint64}
	ints := []int64{0, 1, 127, 128, -1, -32, -33, -128, -129, -32768, -32769, math.MinInt32, math.MinInt32 - 1,
		math.MinInt64, math.MaxInt64, 1 << 40}
	lens := []int{0, 1, 15, 16, 31, 32, 255, 256, 65535, 65536}
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	str := func() string { return strings.Repeat("x", lens[rng.IntN(len(lens))]) }
	bin := func() []byte {
		if rng.IntN(4) == 0 {
			return nil
		}
		return bytes.Repeat([]byte{7}, lens[rng.IntN(len(lens))])
	}
	n := 2000
	if raceEnabled { // one goroutine: the plain run checks all 2,000
		n = 500
	}
	for i := range n {
		r := &record{Op: op(rng.IntN(int(lastOp)) + 1), Seq: uints[rng.IntN(len(uints))],
			Lease: uints[rng.IntN(len(uints))], ID: str(), Flags: uint8(uints[rng.IntN(5)]),
			At: ints[rng.IntN(len(ints))], Due: ints[rng.IntN(len(ints))], Enq: ints[rng.IntN(len(ints))],
			Size: uint32(uints[rng.IntN(9)]), Count: uint32(uints[rng.IntN(9)]), Reason: str(),
			Payload: bin(), Key: str(), Sort: bin()}
		switch rng.IntN(3) {
		case 1:
			r.Headers = map[string]string{}
		case 2:
			r.Headers = map[string]string{str(): str()}
		}
		want := msgpackRecord(t, r)
		got := encodeRecord([]byte("prefix"), r)
		require.Equal(t, "prefix", string(got[:6]))
		require.Equal(t, want, got[6:], "record %d: %+v", i, r)
		around, at := encodeAround([]byte("prefix"), r)
		joined := slices.Concat(around[:at], r.Payload, around[at:])
		require.Equal(t, want, joined[6:], "record %d split around its payload: %+v", i, r)
		var back record
		err := decodeRecord(got[6:], &back)
		if refusedKind(r) {
			require.ErrorIs(t, err, ErrCorrupt, "record %d: %+v", i, r)
			continue
		}
		require.NoError(t, err)
		require.Equal(t, r.Seq, back.Seq)
		require.Equal(t, r.At, back.At)
		require.Equal(t, r.Reason, back.Reason)
	}
}

// refusedKind reports whether decode must refuse r, whose bytes are
// otherwise sound: a flag this release does not know, or a batch settle
// whose packed value Seqs do not decode.
func refusedKind(r *record) bool {
	if r.Flags&^(flagProducerID|flagSorted|flagCursor|flagRecount) != 0 {
		return true
	}
	if (r.Op == opBatchAck || r.Op == opBatchDead) && len(r.Payload) > 0 {
		_, err := decodeBatchSeqs(r.Payload, r.Lease)
		return err != nil
	}
	return false
}

// TestEncodeRecordHeaders checks that a map with many headers round-trips
// (its order is the map's, so bytes are not compared).
func TestEncodeRecordHeaders(t *testing.T) {
	for _, n := range []int{2, 15, 16, 17, 70000} {
		h := make(map[string]string, n)
		for i := range n {
			h["k"+strconv.Itoa(i)] = strings.Repeat("v", i%40)
		}
		var back record
		require.NoError(t, decodeRecord(encodeRecord(nil, &record{Op: opEnqueue, Headers: h}), &back))
		require.Equal(t, h, back.Headers, "%d headers", n)
	}
}

// TestDecodeDamagedAsMsgpack truncates and changes every byte of records
// of every shape the hot paths write (an enqueue, a first delivery, an
// ack, a time before 1970) and checks that decodeRecord reads each
// damaged input as the msgpack decoder does: the same error or none, and
// the same record. The inline reads of the common fields (a fixint, an
// empty string, a nil, a uint64 time) must not read past a failure.
func TestDecodeDamagedAsMsgpack(t *testing.T) {
	for _, r := range []*record{
		{Op: opEnqueue, ID: "0d6c5e35-9a4e-4f0b-8a51-7f0f4c0b2a11", At: 1796263742224046590, Payload: []byte("payload")},
		{Op: opLease, Seq: 70000, ID: "id", Enq: 1796263742224046590, Size: 190, At: 1796263742224046591, Due: 1796263772224046591},
		{Op: opAck, Seq: 70000, Lease: 70002, At: 1796263742224046592},
		{Op: opNack, Seq: 3, Lease: 4, At: -1, Due: -1 << 40, Headers: map[string]string{"k": "v"}, Sort: []byte{}},
	} {
		b := encodeRecord(nil, r)
		for n := range len(b) {
			requireDecodesAsMsgpack(t, b[:n:n])
		}
		for i := range b {
			for _, v := range []byte{0x00, 0x7f, 0x80, mpNil, mpFixStr, mpBin8, mpUint8 + 3, mpInt8 + 3, mpStr8, 0xe0, 0xff} {
				d := bytes.Clone(b)
				d[i] = v
				requireDecodesAsMsgpack(t, d)
			}
		}
	}
}

// requireDecodesAsMsgpack checks that decodeRecord and the msgpack decoder
// agree on b.
func requireDecodesAsMsgpack(t *testing.T, b []byte) {
	t.Helper()
	var got, want record
	err := decodeRecord(b, &got)
	werr := decodeMsgpack(b, &want)
	require.Equal(t, werr == nil, err == nil, "input %x: decodeRecord %v, msgpack %v", b, err, werr)
	require.Equal(t, want, got, "input %x", b)
}

// TestDecodeUintMax: a field is refused when its value is above the
// field's limit, whatever form it is encoded in, the one-byte form too.
func TestDecodeUintMax(t *testing.T) {
	for _, c := range []struct {
		in   []byte
		max  uint64
		want uint64 // when ok
		ok   bool
	}{
		{[]byte{0x05}, 5, 5, true},
		{[]byte{0x06}, 5, 0, false},
		{[]byte{0x7f}, 0x7e, 0, false},
		{[]byte{mpUint8, 0x05}, 5, 5, true},
		{[]byte{mpUint8, 0x06}, 5, 0, false},
		{[]byte{mpUint8 + 1, 0x01, 0x00}, 255, 0, false},
	} {
		d := encodedReader{b: c.in, ok: true}
		got := d.uint(c.max)
		require.Equal(t, c.ok, d.ok, "% x max %d", c.in, c.max)
		if c.ok {
			require.Equal(t, c.want, got, "% x max %d", c.in, c.max)
		}
	}
}

// TestAliasedIDLeavesNoStaleID: decodeRecordAliasedID into a record that
// held another's ID leaves r.ID "" (the cursor reuses one record for every
// record it reads, and keeps r.ID when the view is nil).
func TestAliasedIDLeavesNoStaleID(t *testing.T) {
	b := encodeRecord(nil, &record{Op: opEnqueue, Seq: 7, At: 1})
	r := record{ID: "another's"}
	id, err := decodeRecordAliasedID(b, &r)
	require.NoError(t, err)
	require.Nil(t, id)
	require.Equal(t, "", r.ID)
	require.Equal(t, uint64(7), r.Seq)
}
