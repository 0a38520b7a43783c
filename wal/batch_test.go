package wal

import (
	"bytes"
	"testing"
	"unsafe"
)

// TestBatchLayout pins what storeBatch assumes about tidwall/wal's Batch:
// its layout is batchLayout's, a batch of one entry holds a view of the
// caller's buffer (no copy), a batch of several holds every entry in its
// own bytes, in order, and clear drops the view, so that a later add
// never writes into the caller's buffer.
func TestBatchLayout(t *testing.T) {
	if !batchLayoutKnown {
		t.Fatal("tidwall/wal's Batch is not laid out as batchLayout: every entry is copied twice")
	}
	var b storeBatch
	one := []byte("first entry")
	b.add(7, one)
	v := layoutOf(&b.tw)
	if len(v.entries) != 1 || v.entries[0] != (batchEntry{index: 7, size: len(one)}) {
		t.Fatalf("entries %v after one add", v.entries)
	}
	if unsafe.SliceData(v.datas) != unsafe.SliceData(one) {
		t.Error("a batch of one entry copied it")
	}
	two := []byte("second")
	b.add(8, two)
	if want := append(append([]byte(nil), one...), two...); !bytes.Equal(v.datas, want) {
		t.Fatalf("datas %q, want %q", v.datas, want)
	}
	if unsafe.SliceData(v.datas) == unsafe.SliceData(one) {
		t.Fatal("a batch of two entries wrote into the first one's buffer")
	}
	b.clear()
	b.add(9, one)
	b.clear()
	b.add(10, two)
	b.add(11, two)
	if string(one) != "first entry" {
		t.Fatalf("the caller's buffer changed to %q", one)
	}
	if len(v.entries) != 2 || string(v.datas) != "secondsecond" {
		t.Fatalf("entries %v, datas %q after clear and two adds", v.entries, v.datas)
	}
}
