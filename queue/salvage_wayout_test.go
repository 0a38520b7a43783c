package queue_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
)

// TestSalvageOpenWayOut: an open that salvaged already and still found
// damage it cannot pass (here a file of junk with a segment's name, past
// where the log's next segment would be) must not
// send the user to Options.Salvage or to 'walq repair', which salvages
// the same way and stops at the same place; a plain open names both.
func TestSalvageOpenWayOut(t *testing.T) {
	dir := t.TempDir()
	q, err := queue.Open(dir, nil)
	require.NoError(t, err)
	_, err = q.Enqueue(context.Background(), []byte("kept"))
	require.NoError(t, err)
	require.NoError(t, q.Close())
	require.NoError(t, os.WriteFile(filepath.Join(dir, "log", "00000000000000000099"), []byte("junk"), 0o600))

	_, err = queue.Open(dir, nil)
	require.ErrorIs(t, err, queue.ErrCorrupt)
	require.ErrorContains(t, err, "or open with Options.Salvage", "a plain open names the salvage")

	_, err = queue.Open(dir, &queue.Options{Salvage: true})
	require.ErrorIs(t, err, queue.ErrCorrupt)
	require.ErrorContains(t, err, "00000000000000000099 holds no valid entry", "the damage is still named")
	require.NotContains(t, err.Error(), "Options.Salvage", "the open salvaged already")
	require.NotContains(t, err.Error(), "walq repair", "repair salvages the same way")
	require.ErrorContains(t, err, "the salvage cannot pass this damage")
}
