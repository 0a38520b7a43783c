package queue_test

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"
	"github.com/walq/walq/queue"
)

// bytesAllocated returns the bytes f allocates.
func bytesAllocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// job is a value a typed queue carries: a byte string and a list.
type job struct {
	Data  []byte
	Items []int64
}

// damagedJobs are payloads of a few bytes whose msgpack headers claim
// far more than they hold, as a damaged or hostile producer can write.
var damagedJobs = map[string]string{
	"bin32 of 2 GiB":           "\x81\xa4Data\xc6\x7f\xff\xff\xff" + "0123456789",
	"array32 of 2^26 elements": "\x81\xa5Items\xdd\x04\x00\x00\x00" + "0123456789",
}

// TestTypedDamagedPayloadAllocatesLittle: a payload whose framing claims
// more than it holds comes back from Typed.Dequeue, TryDequeue and
// DequeueBatch as a decode error beside its message, without allocating
// what the framing claims.
func TestTypedDamagedPayloadAllocatesLittle(t *testing.T) {
	ctx := context.Background()
	calls := map[string]func(*testing.T, queue.Typed[job]) (*queue.Message, error){
		"Dequeue": func(_ *testing.T, tq queue.Typed[job]) (*queue.Message, error) {
			_, m, err := tq.Dequeue(ctx)
			return m, err
		},
		"TryDequeue": func(_ *testing.T, tq queue.Typed[job]) (*queue.Message, error) {
			_, m, err := tq.TryDequeue()
			return m, err
		},
		"DequeueBatch": func(t *testing.T, tq queue.Typed[job]) (*queue.Message, error) {
			vs, ms, err := tq.DequeueBatch(ctx, 10)
			require.Len(t, ms, 1)
			require.Len(t, vs, 1)
			var be *queue.BatchError
			require.True(t, errors.As(err, &be), "%v", err)
			require.Error(t, be.Errs[0])
			return ms[0], err
		},
	}
	for call, dequeue := range calls {
		for name, payload := range damagedJobs {
			t.Run(call+"/"+name, func(t *testing.T) {
				q := open(t, t.TempDir(), nil)
				defer q.Close()
				id := enqueue(t, q, payload)
				tq := queue.NewTyped[job](q)
				var m *queue.Message
				var err error
				n := bytesAllocated(func() { m, err = dequeue(t, tq) })
				require.Error(t, err)
				require.NotNil(t, m, "the message is the caller's")
				require.Equal(t, id, m.ID)
				require.Equal(t, []byte(payload), m.Payload)
				require.NoError(t, m.Ack())
				// The bound leaves room for what other goroutines of the
				// test binary allocate meanwhile; each payload claims 8
				// times it at least.
				require.Less(t, n, uint64(64<<20), "bytes allocated to decode a payload of %d bytes", len(payload))
			})
		}
	}
}

// TestTypedDeeplyNestedPayload: a payload of arrays nested three million
// deep, decoded into a value that holds any msgpack value, comes back as a
// decode error: it used to exhaust the goroutine's stack, a fatal error
// no caller could recover from.
func TestTypedDeeplyNestedPayload(t *testing.T) {
	q := open(t, t.TempDir(), nil)
	defer q.Close()
	payload := append(bytes.Repeat([]byte{0x91}, 3<<20), 0)
	id, err := q.Enqueue(context.Background(), payload)
	require.NoError(t, err)
	_, m, err := queue.NewTyped[any](q).TryDequeue()
	require.Error(t, err)
	require.NotNil(t, m)
	require.Equal(t, id, m.ID)
}

// TestTypedRoundTrip: values of every kind the framing check walks over
// decode as they were encoded.
func TestTypedRoundTrip(t *testing.T) {
	type value struct {
		S   string
		B   []byte
		L   []int64
		M   map[string]any
		Any any
	}
	q := open(t, t.TempDir(), nil)
	defer q.Close()
	tq := queue.NewTyped[value](q)
	in := value{S: string(bytes.Repeat([]byte("s"), 70000)), B: bytes.Repeat([]byte("b"), 300),
		L: make([]int64, 20000), M: map[string]any{"a": []any{int8(1), "x", nil, true, 1.5}},
		Any: []any{[]any{[]any{}}}}
	_, err := tq.Enqueue(context.Background(), in)
	require.NoError(t, err)
	out, m, err := tq.TryDequeue()
	require.NoError(t, err)
	require.Equal(t, in, out)
	require.NoError(t, m.Ack())
}

// pair encodes itself as two msgpack values, as msgpack's CustomEncoder
// allows (Encoder.EncodeMulti): no header counts the second.
type pair struct {
	Name string
	Data []byte
}

func (p pair) EncodeMsgpack(enc *msgpack.Encoder) error  { return enc.EncodeMulti(p.Name, p.Data) }
func (p *pair) DecodeMsgpack(dec *msgpack.Decoder) error { return dec.DecodeMulti(&p.Name, &p.Data) }

// tagged holds a pair after another field: its map header counts four
// values, and the pair's Data is a fifth.
type tagged struct {
	N int
	P pair
}

// TestTypedDamagedCustomEncoding: a type that encodes itself as several
// msgpack values decodes, and a payload of it whose framing claims more
// than it holds, past the values its headers count, comes back as a
// decode error without the allocation it claims.
func TestTypedDamagedCustomEncoding(t *testing.T) {
	q := open(t, t.TempDir(), nil)
	defer q.Close()
	tq := queue.NewTyped[tagged](q)
	in := tagged{N: 1, P: pair{"a", []byte("data")}}
	_, err := tq.Enqueue(context.Background(), in)
	require.NoError(t, err)
	out, m, err := tq.TryDequeue()
	require.NoError(t, err)
	require.Equal(t, in, out)
	require.NoError(t, m.Ack())

	payload := "\x82\xa1N\x01\xa1P\xa1a" + "\xc6\x7f\xff\xff\xff" + "0123456789" // Data: a bin32 of 2 GiB
	id := enqueue(t, q, payload)
	n := bytesAllocated(func() { _, m, err = tq.TryDequeue() })
	require.Error(t, err)
	require.NotNil(t, m, "the message is the caller's")
	require.Equal(t, id, m.ID)
	require.Less(t, n, uint64(64<<20), "bytes allocated to decode a payload of %d bytes", len(payload))
}
