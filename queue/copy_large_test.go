package queue_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walq/walq/queue"
)

// TestSalvageCopiesLargeMessages damages the segment after one that holds a
// large message, so that a salvage must copy the message past the damage.
// The copy is a little longer than the enqueue record, and the message may
// have been enqueued under a larger MaxMessageSize than the salvaging open
// has (walq repair opens with the defaults). Either way the salvage must
// copy it, and the message must come out whole.
func TestSalvageCopiesLargeMessages(t *testing.T) {
	const seg = 64 << 10
	cases := []struct {
		name    string
		write   queue.Options // the options it was enqueued under
		payload int
		headers int                                                // bytes of header values
		repair  func(t *testing.T, dir string) (*queue.Queue, int) // and how many messages it copied
	}{
		{"repair with the defaults", queue.Options{MaxMessageSize: 8 << 20}, 6 << 20, 0,
			func(t *testing.T, dir string) (*queue.Queue, int) {
				rep, err := queue.Repair(dir, nil)
				require.NoError(t, err)
				return open(t, dir, &queue.Options{MaxMessageSize: 8 << 20, SegmentSize: seg}), rep.Recovery.Rewritten
			}},
		{"salvage with a lower MaxMessageSize", queue.Options{}, 2 << 20, 0,
			func(t *testing.T, dir string) (*queue.Queue, int) {
				q := open(t, dir, &queue.Options{MaxMessageSize: 64 << 10, SegmentSize: seg, Salvage: true})
				return q, q.Recovery().Rewritten
			}},
		{"headers at the limit", queue.Options{MaxMessageSize: 64 << 10}, 64 << 10, 1<<20 - 80,
			func(t *testing.T, dir string) (*queue.Queue, int) {
				q := open(t, dir, &queue.Options{MaxMessageSize: 64 << 10, SegmentSize: seg, Salvage: true})
				return q, q.Recovery().Rewritten
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			ctx := context.Background()
			o := c.write
			o.SegmentSize = seg
			q := open(t, dir, &o)
			big := bytes.Repeat([]byte("big payload "), c.payload/12+1)[:c.payload]
			var hs map[string]string
			if c.headers > 0 {
				hs = map[string]string{"h": strings.Repeat("v", c.headers)}
			}
			id, err := q.Enqueue(ctx, big, queue.WithHeaders(hs))
			require.NoError(t, err)
			for i := 0; i < 200; i++ {
				_, err := q.Enqueue(ctx, bytes.Repeat([]byte{'s'}, 1000))
				require.NoError(t, err)
			}
			require.NoError(t, q.Close())
			segs, err := filepath.Glob(filepath.Join(dir, "log", "0*"))
			require.NoError(t, err)
			require.Greater(t, len(segs), 3)
			b, err := os.ReadFile(segs[1])
			require.NoError(t, err)
			b[len(b)/2] ^= 0xff
			require.NoError(t, os.WriteFile(segs[1], b, 0o600))

			q, rewritten := c.repair(t, dir)
			defer func() { require.NoError(t, q.Close()) }()
			require.Positive(t, rewritten)
			m, err := q.TryDequeue()
			require.NoError(t, err)
			require.Equal(t, id, m.ID)
			require.True(t, bytes.Equal(big, m.Payload), "payload of %d bytes, want %d", len(m.Payload), len(big))
			require.Equal(t, hs, m.Headers)
		})
	}
}

// TestNewRecordLimit: a new message is still held to MaxMessageSize for its
// payload plus 1 MiB for its headers, id and key, by every way in, though
// the log takes longer records (copies forward).
func TestNewRecordLimit(t *testing.T) {
	ctx := context.Background()
	o := queue.Options{MaxMessageSize: 1 << 10}
	q := open(t, t.TempDir(), &o)
	defer func() { require.NoError(t, q.Close()) }()
	huge := map[string]string{"h": strings.Repeat("v", 1<<20+1<<10)}
	_, err := q.Enqueue(ctx, []byte("p"), queue.WithHeaders(huge))
	require.ErrorIs(t, err, queue.ErrTooLarge)
	_, err = q.EnqueueBatch(ctx, []queue.Item{{Payload: []byte("a")}, {Payload: []byte("b"), Headers: huge}})
	require.ErrorIs(t, err, queue.ErrTooLarge)
	_, err = q.EnqueueAsync(ctx, []byte("p"), queue.WithHeaders(huge))
	require.ErrorIs(t, err, queue.ErrTooLarge)
	require.Zero(t, q.Stats().Enqueued, "nothing refused was enqueued")
	fits := map[string]string{"h": strings.Repeat("v", 1<<20-100)}
	_, err = q.Enqueue(ctx, bytes.Repeat([]byte{'p'}, 1<<10), queue.WithHeaders(fits))
	require.NoError(t, err)

	s, err := queue.OpenSorted[int64](t.TempDir(), &queue.SortedOptions{Options: o})
	require.NoError(t, err)
	defer func() { require.NoError(t, s.Close()) }()
	require.ErrorIs(t, s.Publish(ctx, 1, strings.Repeat("k", 1<<20+1<<10), []byte("p")), queue.ErrTooLarge)
	require.NoError(t, s.Publish(ctx, 1, strings.Repeat("k", 1<<20-100), []byte("p")))
}

// TestReasonLimit: a dead-letter reason is held to the limit of a new
// message's record, as it was before the log took larger copies forward:
// a reason is kept in memory and in every snapshot, so one of a gigabyte
// is refused, on the ack queue and on the sorted queue, and the message
// or batch stays with its consumer.
func TestReasonLimit(t *testing.T) {
	ctx := context.Background()
	o := queue.Options{MaxMessageSize: 1 << 10}
	huge := strings.Repeat("r", 1<<20+1<<10)

	q := open(t, t.TempDir(), &o)
	defer func() { require.NoError(t, q.Close()) }()
	_, err := q.Enqueue(ctx, []byte("p"))
	require.NoError(t, err)
	m, err := q.TryDequeue()
	require.NoError(t, err)
	require.ErrorIs(t, m.DeadLetter(huge), queue.ErrTooLarge)
	require.ErrorIs(t, q.DeadLetterID(m.ID, huge), queue.ErrTooLarge)
	require.ErrorIs(t, q.Settle(queue.Settlement{Receipt: m.Receipt, Op: queue.SettleDeadLetter, Reason: huge}), queue.ErrTooLarge)
	require.Zero(t, q.Stats().Dead, "nothing refused was dead-lettered")
	require.NoError(t, m.DeadLetter("short"))

	s, err := queue.OpenSorted[int64](t.TempDir(), &queue.SortedOptions{Options: o})
	require.NoError(t, err)
	defer func() { require.NoError(t, s.Close()) }()
	require.NoError(t, s.Publish(ctx, 1, "k", []byte("p")))
	bs, err := s.TryPull(10)
	require.NoError(t, err)
	require.ErrorIs(t, bs[0].DeadLetter(huge), queue.ErrTooLarge)
	require.NoError(t, bs[0].DeadLetter("short"))
}
