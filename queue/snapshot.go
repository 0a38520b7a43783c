package queue

import (
	"bytes"
	"fmt"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/walq/walq/index"
)

// snapshotVersion is the version of the snapshot body below. It is part of
// the file format.
const snapshotVersion = 1

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

// encode returns the snapshot body, a msgpack array:
//
//	[Version, Cursor, Last, Pending, PendingBytes, Clean, Counters,
//	 Entries (array of index.Entry), Dedup (array of index.DedupItem),
//	 Pending (array of index.SortedValue), Dead (array of index.SortedValue),
//	 Batches (array of index.Batch), Holds (array of [key, unix ns])]
func (f *frozen) encode() ([]byte, error) {
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	err := enc.EncodeMulti(snapshotVersion, f.cursor, f.last, f.pending, f.pendingBytes, f.clean, &f.counts)
	if err == nil {
		err = enc.EncodeArrayLen(f.table.Len())
	}
	f.table.Ascend(func(e index.Entry) bool {
		if err == nil {
			err = enc.Encode(&e)
		}
		return err == nil
	})
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
		return nil, fmt.Errorf("queue: encode snapshot: %w", err)
	}
	return buf.Bytes(), nil
}

// decodeState rebuilds a state from a snapshot body.
func decodeState(body []byte, o *Options) (*state, error) {
	st := newState(o)
	dec := msgpack.NewDecoder(bytes.NewReader(body))
	var version int
	err := dec.DecodeMulti(&version, &st.cursor, &st.last, &st.pending, &st.pendingBytes, &st.clean, &st.counts)
	if err == nil && version != snapshotVersion {
		err = fmt.Errorf("snapshot body version %d", version)
	}
	if err == nil {
		err = decodeEach(dec, func() error {
			var e index.Entry
			if err := dec.Decode(&e); err != nil {
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
		err = st.decodeSorted(dec)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: snapshot body: %v", ErrCorrupt, err)
	}
	return st, nil
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
	f.sorted.Pending(func(v index.SortedValue) bool { return put(&v) })
	if err == nil {
		err = enc.EncodeArrayLen(dead)
	}
	f.sorted.Dead(func(v index.SortedValue) bool { return put(&v) })
	if err == nil {
		err = enc.EncodeArrayLen(batches)
	}
	f.sorted.Batches(func(b index.Batch) bool { return put(&b) })
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

// decodeSorted reads what encodeSorted wrote into st.sorted.
func (st *state) decodeSorted(dec *msgpack.Decoder) error {
	value := func(put func(index.SortedValue)) func() error {
		return func() error {
			var v index.SortedValue
			if err := dec.Decode(&v); err != nil {
				return err
			}
			put(v)
			return nil
		}
	}
	err := decodeEach(dec, value(st.sorted.Publish))
	if err == nil {
		err = decodeEach(dec, value(st.sorted.PutDead))
	}
	if err == nil {
		err = decodeEach(dec, func() error {
			var b index.Batch
			if err := dec.Decode(&b); err != nil {
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
