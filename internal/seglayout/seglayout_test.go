package seglayout_test

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walq/walq/internal/seglayout"
)

func TestSegment(t *testing.T) {
	dir := t.TempDir()
	seg := filepath.Join(dir, "00000000000000000001")
	a, w := entryFrame(1, 3), entryFrame(4, 0) // records 1-3, then a witness
	b := append(append(append([]byte{}, a...), w...), make([]byte, 64)...)
	require.NoError(t, os.WriteFile(seg, b, 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "00000000000000000001.tmp"), entryFrame(9, 1), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "0000000000000000000x"), entryFrame(9, 1), 0o600))

	got, err := seglayout.Dir(dir)
	require.NoError(t, err)
	require.Equal(t, []seglayout.Entry{
		{Seg: seg, Off: 0, Size: int64(len(a)), Hdr: 1, First: 1, Count: 3},
		{Seg: seg, Off: int64(len(a)), Size: int64(len(w)), Hdr: 1, First: 4, Count: 0},
	}, got, "the zeros after the last entry are no entry; other files are no segment")

	for name, bad := range map[string][]byte{
		"length past the file":          a[:len(a)-1],
		"entry shorter than its header": append([]byte{3}, 0, 0, 0),
	} {
		t.Run(name, func(t *testing.T) {
			require.NoError(t, os.WriteFile(seg, bad, 0o600))
			_, err := seglayout.Segment(seg)
			require.ErrorIs(t, err, seglayout.ErrBadFrame)
		})
	}
}

// entryFrame is `uvarint(len) | entry` for an entry of count records
// from first.
func entryFrame(first uint64, count int) []byte {
	e := make([]byte, 25)
	e[4] = 2
	binary.LittleEndian.PutUint64(e[5:], first)
	binary.LittleEndian.PutUint32(e[13:], uint32(count))
	for range count {
		e = append(e, 1, 'r') // uvarint(len) | record
	}
	return append(binary.AppendUvarint(nil, uint64(len(e))), e...)
}
