package queue

import (
	"errors"
	"testing"

	"github.com/walq/walq/index"
)

// TestDecodeStateRefusesTrailingBytes: a snapshot body that goes on after
// its last section (bytes inside the snapshot's checksum that no release
// of this version writes: a writer that added state without a new body
// version, or not walq) is refused as ErrCorrupt, never opened with what
// follows dropped; the body alone still decodes.
func TestDecodeStateRefusesTrailingBytes(t *testing.T) {
	o := &Options{}
	st := newState(o)
	st.table.Put(index.Entry{Seq: 1, Loc: 1, ID: "a", State: index.Ready})
	st.last = 1
	body, err := st.freeze().encode()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := decodeState(body, o); err != nil {
		t.Fatalf("the body alone: %v", err)
	}
	for _, extra := range [][]byte{{0x00}, {0x90}, []byte("more state")} {
		_, err := decodeState(append(body[:len(body):len(body)], extra...), o)
		if !errors.Is(err, ErrCorrupt) {
			t.Errorf("body + %q: err %v, want ErrCorrupt", extra, err)
		}
	}
}
