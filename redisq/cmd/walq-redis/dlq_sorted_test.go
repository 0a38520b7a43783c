package main_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/redisq"
	"github.com/walq/walq/redisq/internal/redistest"
)

// TestDLQRequeueKeepsSingleFlight: walq-redis dlq requeue on a
// SingleFlight queue (which it opens with the setting the queue records)
// does not make a key pullable while it has a batch out.
func TestDLQRequeueKeepsSingleFlight(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	s, err := redisq.OpenSorted[int64](ctx, srv.Client(), "sf", &redisq.SortedOptions{SingleFlight: true})
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.Publish(ctx, 1, "k", []byte("one")))
	bs, err := s.TryPull(10)
	require.NoError(t, err)
	require.NoError(t, bs[0].DeadLetter("poison"))
	require.NoError(t, s.Publish(ctx, 2, "k", []byte("two")))
	out, err := s.TryPull(10) // batch of k out
	require.NoError(t, err)
	require.Len(t, out, 1)
	_, err = s.TryPull(10)
	require.ErrorIs(t, err, queue.ErrEmpty, "single flight before requeue")

	url := "redis://" + srv.Addr + "/0/sf"
	line := strings.TrimSpace(run(t, 0, "", "dlq", "list", "--json", url).stdout)
	var d struct{ ID string }
	require.NoError(t, json.Unmarshal([]byte(line), &d))
	run(t, 0, "", "dlq", "requeue", url, d.ID)

	got, err := s.TryPull(10)
	if err == nil {
		t.Fatalf("key k leased twice at once under SingleFlight after walq-redis dlq requeue: second batch %q while batch %q is out", got[0].Key, out[0].Key)
	}
	require.ErrorIs(t, err, queue.ErrEmpty)
}

// TestDLQCorruptSortPart: dlq list names a dead value whose stored record
// keeps its publish time but not a readable sort part by SEQ@TIME, which
// dlq purge takes; one whose publish time cannot be read by its SEQ
// alone, which dlq requeue takes.
func TestDLQCorruptSortPart(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	rdb := srv.Client()
	s, err := redisq.OpenSorted[int64](ctx, rdb, "cs", nil)
	require.NoError(t, err)
	defer s.Close()
	for i, k := range []string{"k", "j"} {
		require.NoError(t, s.Publish(ctx, int64(i), k, []byte("one")))
	}
	bs, err := s.TryPull(10)
	require.NoError(t, err)
	for _, b := range bs {
		require.NoError(t, b.DeadLetter("poison"))
	}
	ds, err := s.DeadValues(0, 0)
	require.NoError(t, err)
	// the first record with a sort part of 1 byte, its publish time intact
	at := binary.BigEndian.AppendUint64(nil, uint64(ds[0].PublishedAt.UnixNano()))
	require.NoError(t, rdb.HSet(ctx, "walq:{cs}:s:val", ds[0].Seq, "\x93\xc4\x01\x00\xd3"+string(at)+"\xc4\x03one").Err())
	require.NoError(t, rdb.HSet(ctx, "walq:{cs}:s:val", ds[1].Seq, "garbage").Err())
	url := "redis://" + srv.Addr + "/0/cs"
	var ids []string
	for _, line := range strings.Split(strings.TrimSpace(run(t, 0, "", "dlq", "list", "--json", url).stdout), "\n") {
		var d struct{ ID, Reason string }
		require.NoError(t, json.Unmarshal([]byte(line), &d))
		require.Contains(t, d.Reason, "corrupt record")
		ids = append(ids, d.ID)
	}
	require.Equal(t, []string{fmt.Sprintf("%d@%d", ds[0].Seq, ds[0].PublishedAt.UnixNano()), fmt.Sprint(ds[1].Seq)}, ids)
	run(t, 0, "", "dlq", "purge", url, ids[0])
	run(t, 0, "", "dlq", "requeue", url, ids[1])
	st := s.Stats()
	require.Equal(t, [2]int{0, 1}, [2]int{st.SortedDead, st.SortedPending})
}
