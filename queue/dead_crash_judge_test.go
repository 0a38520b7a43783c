package queue_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walq/walq/internal/crashfs"
	"github.com/walq/walq/queue"
)

// requireLoggedDeadKept builds power-loss states of fsys, crashed at its
// durable operation crashAt: first the one that keeps only what was made
// durable (every write no fsync covered lost, so a dead-lettering logged
// before its fsync is always missing from it), then states sampled ones
// (the PCG's second word is stream). It requires every value logged as
// dead-lettered to be in the dead set that dead reads from each reopened
// queue directory: the log never claims a move the disk may not keep. A
// state with a hole that Open may refuse (crashfs.State.MayRefuse) may be
// refused with ErrCorrupt instead: nothing tells such a hole from damage,
// and a refused queue delivers nothing.
func requireLoggedDeadKept[T comparable](t *testing.T, fsys *crashfs.FS, crashAt, states int, stream uint64,
	logged []T, dead func(t *testing.T, dir string) ([]T, error)) {
	t.Helper()
	require.NoError(t, fsys.Image())
	dst := filepath.Join(t.TempDir(), "q")
	st, err := fsys.MaterializeSynced(dst)
	require.NoError(t, err)
	requireDeadIn(t, st, fmt.Sprintf("crash at durable op %d, synced state", crashAt), logged, dead, dst)
	for s := range states {
		seed := uint64(crashAt*100 + s)
		dst := filepath.Join(t.TempDir(), "q")
		st, err := fsys.Materialize(dst, rand.New(rand.NewPCG(seed, stream)))
		require.NoError(t, err)
		requireDeadIn(t, st, fmt.Sprintf("crash at durable op %d, state seed %d", crashAt, seed), logged, dead, dst)
	}
}

// requireDeadIn requires every value of logged to be dead in the queue
// of the crash state st, materialized in dst (where says which), or the
// state to be one that Open may refuse (see requireLoggedDeadKept).
func requireDeadIn[T comparable](t *testing.T, st crashfs.State, where string, logged []T,
	dead func(t *testing.T, dir string) ([]T, error), dst string) {
	t.Helper()
	got, err := dead(t, filepath.Join(dst, "q"))
	if err != nil {
		require.True(t, st.MayRefuse(dst) && errors.Is(err, queue.ErrCorrupt),
			"%s (%s): reopen: %v", where, st.Desc, err)
		return
	}
	for _, v := range logged {
		require.Contains(t, got, v, "%s (%s): %v logged as dead-lettered, not dead after the reopen (dead: %v)",
			where, st.Desc, v, got)
	}
}
