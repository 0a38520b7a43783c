package queue_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
)

// TestDeadLettersBesidePurgeAndCompact: a letter purged while DeadLetters
// reads the letters' payloads, and compacted out of the log, is gone: the
// listing leaves it out, as if purged before the call, and lists the
// others whole; it does not fail.
func TestDeadLettersBesidePurgeAndCompact(t *testing.T) {
	fsys := &gateFS{}
	q := deadLettersOutOfCache(t, fsys)
	defer q.Close()
	var dls []queue.DeadLetter
	_, err := whileReadHeld(t, fsys, func() (int, error) {
		var err error
		dls, err = q.DeadLetters(0, 0)
		return len(dls), err
	}, func() {
		require.NoError(t, q.PurgeDead("d1"))
		require.NoError(t, q.Compact())
	})
	require.NoError(t, err)
	require.Len(t, dls, 2)
	for i, id := range []string{"d0", "d2"} {
		require.Equal(t, id, dls[i].ID)
		want := fmt.Sprint("dead", id[1:], "|", string(bytes.Repeat([]byte("d"), 1500)))
		require.Equal(t, want, string(dls[i].Payload), id)
	}
}

// TestDeadValuesBesidePurgeAndCompact: the same for a sorted queue's
// DeadValues.
func TestDeadValuesBesidePurgeAndCompact(t *testing.T) {
	fsys := &gateFS{}
	s, dead := deadValuesOutOfCache(t, fsys)
	defer s.Close()
	var dvs []queue.DeadValue[int64]
	_, err := whileReadHeld(t, fsys, func() (int, error) {
		var err error
		dvs, err = s.DeadValues(0, 0)
		return len(dvs), err
	}, func() {
		require.NoError(t, s.PurgeDead(dead[1].Seq))
		require.NoError(t, s.Compact())
	})
	require.NoError(t, err)
	require.Len(t, dvs, 2)
	for i, d := range []queue.DeadValue[int64]{dead[0], dead[2]} {
		require.Equal(t, d.Seq, dvs[i].Seq)
		require.Equal(t, d.Payload, dvs[i].Payload)
	}
}
