package queue

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestIdentityGolden pins the identity file's bytes: a change to the format
// fails here, and an old directory's file must still decode.
func TestIdentityGolden(t *testing.T) {
	cases := []struct {
		file string
		id   Identity
	}{
		{"identity-ack.golden", Identity{Format: 1, Kind: KindAck}},
		{"identity-sorted-int64.golden", Identity{Format: 1, Kind: KindSorted, SortKey: "int64"}},
		{"identity-windowed.golden", Identity{Format: 1, Kind: KindWindowed, SortKey: "time"}},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			want, err := os.ReadFile(filepath.Join("testdata", c.file))
			require.NoError(t, err)
			require.Equal(t, want, encodeIdentity(c.id))
			got, err := decodeIdentity(want)
			require.NoError(t, err)
			require.Equal(t, c.id, got)
		})
	}
}
