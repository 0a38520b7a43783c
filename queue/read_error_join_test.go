package queue_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/internal/testhook"
	"github.com/walq/walq/queue"
)

// ReadErrors finds every ReadError of a delivery under a caller's own
// wrapping: a join of joins, fmt.Errorf with one %w or several, which
// walking Unwrap() []error of the top error alone misses.
func TestReadErrorsWalksTheTree(t *testing.T) {
	s := openDamagedSorted(t)
	_, err := s.Pull(context.Background(), 100)
	require.ErrorIs(t, err, queue.ErrCorrupt)
	want := queue.ReadErrors(err)
	require.Greater(t, len(want), 1, "the damage spans several keys: %v", err)
	other := errors.New("other")
	a, b := &queue.ReadError{Key: "x", Err: other}, &queue.ReadError{Key: "y", Err: other}
	cases := []struct {
		name string
		err  error
		want []*queue.ReadError
	}{
		{"nil", nil, nil},
		{"none", fmt.Errorf("job: %w", other), nil},
		{"alone", a, []*queue.ReadError{a}},
		{"wrapped", fmt.Errorf("job: %w", err), want},
		{"join of joins", errors.Join(other, errors.Join(a, err), b), append(append([]*queue.ReadError{a}, want...), b)},
		{"several %w", fmt.Errorf("job: %w, then %w", errors.Join(err, other), fmt.Errorf("retry: %w", b)),
			append(append([]*queue.ReadError(nil), want...), b)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			require.Equal(t, c.want, queue.ReadErrors(c.err))
		})
	}
}

// openDamagedSorted opens a sorted queue whose key "broken" (sort 1, seq
// 1) lies in a damaged sealed segment, beside seven filler keys, with key
// "a" (sort 2) in a sound segment.
func openDamagedSorted(t *testing.T) *queue.Sorted[int64] {
	t.Helper()
	o := queue.SortedOptions{CacheBytes: -1, Options: queue.Options{SegmentSize: 4096, ManualRequeue: true}}
	testhook.SetManualCompaction(&o.Options)
	dir := t.TempDir()
	s, err := queue.OpenSorted[int64](dir, &o)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	ctx := context.Background()
	pad := string(bytes.Repeat([]byte("p"), 600))
	require.NoError(t, s.Publish(ctx, 1, "broken", []byte("BROKEN|"+pad)))
	for i := range 7 {
		require.NoError(t, s.Publish(ctx, int64(100+i), fmt.Sprint("f", i), []byte(fmt.Sprintf("f%d|%s", i, pad))))
	}
	require.Len(t, segments(t, dir), 2)
	require.NoError(t, s.Publish(ctx, 2, "a", []byte("A|"+pad)))
	corruptSegment(t, segments(t, dir)[0], []byte("BROKEN"))
	return s
}

// A dead value whose payload cannot be read made DeadValues fail as a
// whole, so that dead-lettering an unreadable batch, as a ReadError
// advises, left the whole dead set unlistable. It is now listed without
// payload, its reason telling why, beside the readable ones.
func TestDeadValuesBesideDamaged(t *testing.T) {
	s := openDamagedSorted(t)
	ctx := context.Background()
	bs, err := s.Pull(ctx, 100)
	require.ErrorIs(t, err, queue.ErrCorrupt)
	res := queue.ReadErrors(err)
	require.NotEmpty(t, res, "%v", err)
	for _, re := range res {
		require.NoError(t, s.DeadLetter(re.Receipt, "unreadable"), re.Key)
	}
	for _, b := range bs {
		require.NoError(t, s.DeadLetter(b.Receipt, "bad input"), b.Key)
	}

	dead, err := s.DeadValues(0, 0)
	require.NoError(t, err, "damaged dead values do not hide the others")
	require.Len(t, dead, 9)
	damaged := map[string]bool{}
	for _, re := range res {
		damaged[re.Key] = true
	}
	require.True(t, damaged["broken"])
	for _, d := range dead {
		require.NotZero(t, d.Seq)
		require.False(t, d.PublishedAt.IsZero(), d.Key)
		if !damaged[d.Key] {
			require.Equal(t, "bad input", d.Reason, d.Key)
			require.True(t, strings.HasPrefix(string(d.Payload), d.Key+"|") || (d.Key == "a" && strings.HasPrefix(string(d.Payload), "A|")), d.Key)
			continue
		}
		require.Nil(t, d.Payload, "%s: no payload from bad bytes", d.Key)
		require.True(t, strings.HasPrefix(d.Reason, "unreadable; corrupt record: "), "%s: %s", d.Key, d.Reason)
		if d.Key == "broken" {
			require.Equal(t, uint64(1), d.Seq)
			require.Equal(t, int64(1), d.Sort, "the sort key comes from the index")
		}
	}
	page, err := s.DeadValues(0, 1)
	require.NoError(t, err)
	require.Len(t, page, 1)
	require.Equal(t, "broken", page[0].Key)
	require.NoError(t, s.PurgeDeadValue(page[0]), "a listed damaged value can be purged by its name")
}

// A Pull named only the first batch it could not read; the others stayed
// leased, unnamed. Every one is named now.
func TestPullNamesEveryUnreadableBatch(t *testing.T) {
	s := openDamagedSorted(t)
	bs, err := s.Pull(context.Background(), 100)
	require.ErrorIs(t, err, queue.ErrCorrupt)
	var first *queue.ReadError
	require.True(t, errors.As(err, &first), "%v", err)
	require.Equal(t, "broken", first.Key)
	res := queue.ReadErrors(err)
	require.Greater(t, len(res), 1, "the damage spans several keys: %v", err)
	require.Equal(t, 9, len(bs)+len(res), "every key pulled is delivered or named")
	keys := map[string]bool{}
	for _, re := range res {
		require.ErrorIs(t, re, queue.ErrCorrupt)
		require.False(t, keys[re.Key], "%s named twice", re.Key)
		keys[re.Key] = true
		require.Contains(t, err.Error(), fmt.Sprintf("%q", re.Key))
		require.NoError(t, s.DeadLetter(re.Receipt, "unreadable"), "%s: its receipt ends its lease", re.Key)
	}
	require.Equal(t, len(res), s.Stats().SortedDead)
}

// A DequeueBatch named only the first message it could not read; the
// others stayed leased, unnamed, until AckTimeout. Every one is named now.
func TestDequeueBatchNamesEveryUnreadable(t *testing.T) {
	clock := newFakeClock()
	o := queue.Options{SegmentSize: 4096, ManualRequeue: true, Clock: clock, AckTimeout: time.Hour}
	testhook.SetManualCompaction(&o)
	dir := t.TempDir()
	q := open(t, dir, &o)
	defer q.Close()
	pad := string(bytes.Repeat([]byte("p"), 600))
	broken := enqueue(t, q, "BROKEN|"+pad)
	for i := range 7 {
		enqueue(t, q, fmt.Sprint("f", i, "|", pad))
	}
	require.Len(t, segments(t, dir), 2)
	enqueue(t, q, "A|"+pad)
	for range 9 {
		require.NoError(t, tryDequeue(t, q).Nack(time.Minute)) // into the table
	}
	corruptSegment(t, segments(t, dir)[0], []byte("BROKEN"))
	clock.Advance(2 * time.Minute)

	ms, err := q.DequeueBatch(context.Background(), 10)
	require.ErrorIs(t, err, queue.ErrCorrupt)
	var first *queue.ReadError
	require.True(t, errors.As(err, &first), "%v", err)
	require.Equal(t, broken, first.ID)
	res := queue.ReadErrors(err)
	require.Greater(t, len(res), 1, "the damage spans several messages: %v", err)
	require.Equal(t, 9, len(ms)+len(res), "every message leased is delivered or named")
	require.NoError(t, ms.Ack())
	ids := map[string]bool{}
	for _, re := range res {
		require.ErrorIs(t, re, queue.ErrCorrupt)
		require.False(t, ids[re.ID], "%s named twice", re.ID)
		ids[re.ID] = true
		require.Contains(t, err.Error(), re.ID)
		require.NoError(t, q.DeadLetter(re.Delivery, "unreadable"), re.ID)
	}
	st := q.Stats()
	require.Zero(t, st.InFlight, "every unreadable message was named, none is left leased")
	require.EqualValues(t, len(res), st.Dead)
}
