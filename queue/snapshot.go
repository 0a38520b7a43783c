package queue

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/walq/walq/index"
)

// snapshotVersion is the version of the snapshot body below. It is part of
// the file format. Version 2 added index.Entry.Undelivered, the twelfth
// field of an entry; a version 1 body, whose entries have eleven, is still
// read (its entries are not Undelivered).
const snapshotVersion = 2

// frozen is a state frozen for a snapshot: scalars copied, indexes cloned
// copy-on-write, so it can be encoded while the queue goes on.
type frozen struct {
	cursor, last          uint64
	pending, pendingBytes int64
	clean                 bool
	counts                counters
	table                 *index.Snapshot
	dedup                 *index.DedupSnapshot
	sorted                *index.SortedSnapshot
}

// freeze captures the state. The caller holds the queue's mutex.
func (s *state) freeze() *frozen {
	return &frozen{
		cursor: s.cursor, last: s.last, pending: s.pending, pendingBytes: s.pendingBytes,
		clean: s.clean, counts: s.counts,
		table: s.table.Snapshot(), dedup: s.dedup.Snapshot(), sorted: s.sorted.Snapshot(),
	}
}

// encodeTo writes the snapshot body to w, a msgpack array:
//
//	[Version, Cursor, Last, Pending, PendingBytes, Clean, Counters,
//	 Entries (array of index.Entry, each the array of its 12 fields),
//	 Dedup (array of index.DedupItem),
//	 Pending (array of storedValue), Dead (array of storedValue),
//	 Batches (array of storedBatch), Holds (array of [key, unix ns])]
func (f *frozen) encodeTo(w io.Writer) error {
	enc := msgpack.NewEncoder(w)
	err := enc.EncodeMulti(snapshotVersion, f.cursor, f.last, f.pending, f.pendingBytes, f.clean, &f.counts)
	if err == nil {
		err = enc.EncodeArrayLen(f.table.Len())
	}
	if err == nil {
		err = f.encodeEntries(enc.Writer())
	}
	if err == nil {
		err = enc.EncodeArrayLen(f.dedup.Len())
	}
	f.dedup.Ascend(func(it index.DedupItem) bool {
		if err == nil {
			err = enc.Encode(&it)
		}
		return err == nil
	})
	if err == nil {
		err = f.encodeSorted(enc)
	}
	if err != nil {
		return fmt.Errorf("queue: encode snapshot: %w", err)
	}
	return nil
}

// entryChunk is how many bytes of encoded entries encodeEntries gathers
// before it writes them.
const entryChunk = 64 << 10

// encodeEntries writes the table's entries to w in Seq order, each as
// appendEntry encodes it, in writes of about entryChunk bytes.
func (f *frozen) encodeEntries(w io.Writer) error {
	buf := make([]byte, 0, entryChunk+256)
	var err error
	f.table.Ascend(func(e index.Entry) bool {
		buf = appendEntry(buf, &e)
		if len(buf) >= entryChunk {
			_, err = w.Write(buf)
			buf = buf[:0]
		}
		return err == nil
	})
	if err == nil && len(buf) > 0 {
		_, err = w.Write(buf)
	}
	return err
}

// appendEntry appends e as vmihailenco/msgpack's Encoder writes an
// index.Entry (a 12-field array, fixed-width integers: uint64 0xcf, int64
// 0xd3, uint32 0xce, uint8 0xcc), without reflection:
//
//	[Seq, Loc, ID, Size, EnqueuedAt, Deliveries, State, Due, Lease, DeliveredAt, Reason, Undelivered]
//
// TestAppendEntryMatchesMsgpack holds it to the encoder's bytes.
func appendEntry(dst []byte, e *index.Entry) []byte {
	dst = append(dst, mpFixArray|entryFields)
	dst = binary.BigEndian.AppendUint64(append(dst, mpUint8+3), e.Seq)
	dst = binary.BigEndian.AppendUint64(append(dst, mpUint8+3), e.Loc)
	dst = appendString(dst, e.ID)
	dst = binary.BigEndian.AppendUint32(append(dst, mpUint8+2), e.Size)
	dst = binary.BigEndian.AppendUint64(append(dst, mpInt8+3), uint64(e.EnqueuedAt))
	dst = binary.BigEndian.AppendUint32(append(dst, mpUint8+2), e.Deliveries)
	dst = append(dst, mpUint8, byte(e.State))
	dst = binary.BigEndian.AppendUint64(append(dst, mpInt8+3), uint64(e.Due))
	dst = binary.BigEndian.AppendUint64(append(dst, mpUint8+3), e.Lease)
	dst = binary.BigEndian.AppendUint64(append(dst, mpInt8+3), uint64(e.DeliveredAt))
	dst = appendString(dst, e.Reason)
	if e.Undelivered {
		return append(dst, mpTrue)
	}
	return append(dst, mpFalse)
}

// entryFields is the number of fields of an index.Entry in a version 2
// snapshot.
const entryFields = 12

// decodeState rebuilds a state from a snapshot body. A body that goes on
// after its last section is refused as ErrCorrupt: no release writes one
// (a writer that adds state writes a new body version, which an older
// release refuses), so what follows would be state this release drops.
func decodeState(body []byte, o *Options) (*state, error) {
	st := newState(o)
	r := bytes.NewReader(body)
	dec := msgpack.NewDecoder(r)
	var version int
	err := dec.DecodeMulti(&version, &st.cursor, &st.last, &st.pending, &st.pendingBytes, &st.clean, &st.counts)
	if err == nil && (version < 1 || version > snapshotVersion) {
		err = fmt.Errorf("snapshot body version %d", version)
	}
	if err == nil {
		err = decodeEach(dec, func() error {
			e, err := decodeEntry(dec, version)
			if err != nil {
				return err
			}
			st.table.Put(e)
			return nil
		})
	}
	if err == nil {
		err = decodeEach(dec, func() error {
			var it index.DedupItem
			if err := dec.Decode(&it); err != nil {
				return err
			}
			st.dedup.Put(it)
			return nil
		})
	}
	if err == nil {
		err = st.decodeSorted(dec, r.Len)
	}
	if err == nil && r.Len() > 0 {
		err = fmt.Errorf("%d bytes after its last section", r.Len())
	}
	if err != nil {
		return nil, fmt.Errorf("%w: snapshot body: %v", ErrCorrupt, err)
	}
	return st, nil
}

// decodeEntry reads an index.Entry as a snapshot body of version stores
// it: the array of its fields, without the last (Undelivered) in version 1.
func decodeEntry(dec *msgpack.Decoder, version int) (index.Entry, error) {
	var e index.Entry
	if version >= 2 {
		err := dec.Decode(&e)
		return e, err
	}
	n, err := dec.DecodeArrayLen()
	if err == nil && n != 11 {
		err = fmt.Errorf("entry of %d fields, want 11", n)
	}
	if err == nil {
		err = dec.DecodeMulti(&e.Seq, &e.Loc, &e.ID, &e.Size, &e.EnqueuedAt, &e.Deliveries, &e.State,
			&e.Due, &e.Lease, &e.DeliveredAt, &e.Reason)
	}
	return e, err
}

// decodeEach reads an array length and calls one for each element.
func decodeEach(dec *msgpack.Decoder, one func() error) error {
	n, err := dec.DecodeArrayLen()
	if err != nil {
		return err
	}
	for i := 0; i < n; i++ {
		if err := one(); err != nil {
			return fmt.Errorf("element %d of %d: %w", i, n, err)
		}
	}
	return nil
}

// storedValue is an index.SortedValue or index.DeadValue as a snapshot
// stores it: an array of its eight fields (Reason empty unless dead).
type storedValue struct {
	_msgpack struct{} `msgpack:",as_array"`

	Key        string
	Sort       []byte
	Seq, Loc   uint64
	Size       uint32
	At         int64
	Deliveries uint32
	Reason     string
}

func toStored(v index.SortedValue, reason string) *storedValue {
	return &storedValue{Key: v.Key, Sort: v.Sort, Seq: v.Seq, Loc: v.Loc, Size: v.Size, At: v.At,
		Deliveries: v.Deliveries, Reason: reason}
}

// storedBatch is an index.Batch as a snapshot stores it: an array of its
// five fields.
type storedBatch struct {
	_msgpack struct{} `msgpack:",as_array"`

	Lease  uint64
	Key    string
	Due    int64
	At     int64
	Values []storedValue
}

// encodeSorted writes the sorted index's four arrays.
func (f *frozen) encodeSorted(enc *msgpack.Encoder) error {
	pending, dead, batches, holds := f.sorted.Len()
	var err error
	put := func(v any) bool {
		if err == nil {
			err = enc.Encode(v)
		}
		return err == nil
	}
	err = enc.EncodeArrayLen(pending)
	f.sorted.Pending(func(v index.SortedValue) bool { return put(toStored(v, "")) })
	if err == nil {
		err = enc.EncodeArrayLen(dead)
	}
	f.sorted.Dead(func(d index.DeadValue) bool { return put(toStored(d.SortedValue, d.Reason)) })
	if err == nil {
		err = enc.EncodeArrayLen(batches)
	}
	f.sorted.Batches(func(b index.Batch) bool {
		sb := &storedBatch{Lease: b.Lease, Key: b.Key, Due: b.Due, At: b.At, Values: make([]storedValue, len(b.Values))}
		for i, v := range b.Values {
			sb.Values[i] = *toStored(v, "")
		}
		return put(sb)
	})
	if err == nil {
		err = enc.EncodeArrayLen(holds)
	}
	f.sorted.Holds(func(key string, at int64) bool {
		if err == nil {
			err = enc.EncodeMulti(key, at)
		}
		return err == nil
	})
	return err
}

// decodeSorted reads what encodeSorted wrote into st.sorted; left is how
// many bytes of the body remain.
func (st *state) decodeSorted(dec *msgpack.Decoder, left func() int) error {
	value := func(put func(index.DeadValue)) func() error {
		return func() error {
			v, err := decodeSortedValue(dec, left)
			if err != nil {
				return err
			}
			put(v)
			return nil
		}
	}
	err := decodeEach(dec, value(func(d index.DeadValue) { st.sorted.Publish(d.SortedValue) }))
	if err == nil {
		err = decodeEach(dec, value(st.sorted.PutDead))
	}
	if err == nil {
		err = decodeEach(dec, func() error {
			b, err := decodeBatch(dec, left)
			if err != nil {
				return err
			}
			st.sorted.PutBatch(b)
			return nil
		})
	}
	if err == nil {
		err = decodeEach(dec, func() error {
			var key string
			var at int64
			if err := dec.DecodeMulti(&key, &at); err != nil {
				return err
			}
			st.sorted.Hold(key, at)
			return nil
		})
	}
	return err
}

// decodeBatch reads an index.Batch, which msgpack writes as the array of
// its five fields. It reads the value array itself: msgpack v5.4.1
// allocates a slice of whatever length an array claims before reading an
// element (decodeSliceValue's allocation limit never applies), so a
// damaged body could make it allocate gigabytes. Every value takes at
// least one byte of the body left.
func decodeBatch(dec *msgpack.Decoder, left func() int) (index.Batch, error) {
	var b index.Batch
	n, err := dec.DecodeArrayLen()
	if err == nil && n != 5 {
		err = fmt.Errorf("batch of %d fields, want 5", n)
	}
	if err == nil {
		err = dec.DecodeMulti(&b.Lease, &b.Key, &b.Due, &b.At)
	}
	if err == nil {
		n, err = dec.DecodeArrayLen()
	}
	if err == nil && n > left() {
		err = fmt.Errorf("batch claims %d values in %d bytes", n, left())
	}
	for i := 0; err == nil && i < n; i++ {
		var v index.DeadValue
		if v, err = decodeSortedValue(dec, left); err == nil {
			b.Values = append(b.Values, v.SortedValue)
		}
	}
	return b, err
}

// decodeSortedValue reads a storedValue with fieldReader, whose byte
// strings are bounded by the input (see fieldReader.bytes).
func decodeSortedValue(dec *msgpack.Decoder, left func() int) (index.DeadValue, error) {
	var v index.DeadValue
	n, err := dec.DecodeArrayLen()
	if err == nil && n != 8 {
		err = fmt.Errorf("sorted value of %d fields, want 8", n)
	}
	if err != nil {
		return v, err
	}
	d := fieldReader{dec: dec, left: left}
	v.Key, v.Sort = d.string(), d.bytes()
	v.Seq, v.Loc = d.uint(1<<64-1), d.uint(1<<64-1)
	v.Size = uint32(d.uint(1<<32 - 1))
	v.At = d.int()
	v.Deliveries = uint32(d.uint(1<<32 - 1))
	v.Reason = d.string()
	return v, d.err
}
