package queue_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/internal/faultfs"
	"github.com/walq/walq/queue"
)

// RequeueExpired on a poisoned log returns the error that poisoned it,
// not (0, nil), a healthy "no lease ran out", as PurgeAllDead and
// RequeueAllDead now do: here after an ack whose write failed, which the
// state counts as made though no file holds it.
func TestRequeueExpiredPoisonedLog(t *testing.T) {
	run := func(fs *faultfs.FS) (*queue.Queue, error, int) {
		q := open(t, t.TempDir(), &queue.Options{FS: fs, ManualRequeue: true})
		enqueue(t, q, "v")
		m := tryDequeue(t, q)
		before := len(fs.Ops())
		return q, q.Ack(m.Receipt), before
	}
	dry := faultfs.New(0)
	q, err, before := run(dry)
	require.NoError(t, err)
	require.NoError(t, q.Close())
	q, err, _ = run(faultfs.New(firstWriteAfter(dry, before)))
	require.ErrorIs(t, err, faultfs.ErrInjected)
	defer q.Close()
	n, err := q.RequeueExpired()
	require.ErrorIs(t, err, faultfs.ErrInjected, "RequeueExpired on a poisoned log answered (%d, %v)", n, err)
}
