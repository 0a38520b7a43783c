package dashboard_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walq/walq/dashboard"
	"github.com/walq/walq/queue"
)

// TestSortedDeadRefIsFenced: a sorted queue's dead value is referred to
// as SEQ@PUBLISHED_UNIX_NS; a reference whose seq now holds a value
// published at another time (as after a power loss that gave the seq to a
// new publish) is not found by the message view, requeue or purge, and
// the value stays dead. Pages follow such references; a bare seq is
// viewed, but requeue and purge refuse it (400), as for ack queues.
func TestSortedDeadRefIsFenced(t *testing.T) {
	sq, err := queue.OpenSorted[int](t.TempDir(), &queue.SortedOptions{Options: queue.Options{ManualRequeue: true}})
	require.NoError(t, err)
	defer sq.Close()
	ctx := context.Background()
	for i, key := range []string{"a", "b", "c"} {
		require.NoError(t, sq.Publish(ctx, i, key, []byte("payload "+key)))
	}
	bs, err := sq.TryPull(10)
	require.NoError(t, err)
	for _, b := range bs {
		require.NoError(t, b.DeadLetter("bad "+b.Key))
	}
	ds, err := sq.DeadValues(0, 0)
	require.NoError(t, err)
	require.Len(t, ds, 3)
	s := server(t, dashboard.ForSorted(sq), &dashboard.Options{Actions: true})

	var refs []string
	for after := ""; ; {
		var p dashboard.Page
		require.Equal(t, 200, getJSON(t, s.URL+"/queue/api/messages?state=dead&limit=1&after="+after, &p))
		for _, m := range p.Messages {
			refs = append(refs, m.Ref)
		}
		if after = p.Next; after == "" {
			break
		}
	}
	want := make([]string, len(ds))
	for i, d := range ds {
		want[i] = fmt.Sprintf("%d@%d", d.Seq, d.PublishedAt.UnixNano())
	}
	require.Equal(t, want, refs, "the pages name every dead value by seq and publish time")

	same := map[string]string{"Origin": s.URL, "Sec-Fetch-Site": "same-origin"}
	stale := fmt.Sprintf("%d@%d", ds[0].Seq, ds[0].PublishedAt.UnixNano()+1)
	var e struct{ Error string }
	require.Equal(t, 404, getJSON(t, s.URL+"/queue/api/message?ref="+stale, &e))
	for _, action := range []string{"requeue", "purge"} {
		code, msg := post(t, s.URL+"/queue/api/dead/"+action, `{"ref":"`+stale+`"}`, same)
		require.Equal(t, 404, code, "%s of a stale reference: %s", action, msg)
	}
	for _, bad := range []string{"1@", "1@x", "@1", "0@1"} {
		require.Equal(t, 400, getJSON(t, s.URL+"/queue/api/message?ref="+bad, &e), "reference %q", bad)
	}
	now, err := sq.DeadValues(0, 0)
	require.NoError(t, err)
	require.Equal(t, ds, now, "a stale reference changed the dead set")

	var one dashboard.Message
	require.Equal(t, 200, getJSON(t, s.URL+"/queue/api/message?ref="+refs[0], &one))
	require.Equal(t, refs[0], one.Ref)
	code, msg := post(t, s.URL+"/queue/api/dead/requeue", `{"ref":"`+refs[0]+`"}`, same)
	require.Equal(t, 200, code, msg)
	bare := strconv.FormatUint(ds[1].Seq, 10)
	for _, action := range []string{"requeue", "purge"} {
		code, msg = post(t, s.URL+"/queue/api/dead/"+action, `{"ref":"`+bare+`"}`, same)
		require.Equal(t, 400, code, "%s of a bare seq, which a crash may have given to another value: %s", action, msg)
	}
	require.Equal(t, 200, getJSON(t, s.URL+"/queue/api/message?ref="+bare, &one), "a bare seq is viewed")
	require.Equal(t, refs[1], one.Ref, "the view names the value in full")
	code, msg = post(t, s.URL+"/queue/api/dead/purge", `{"ref":"`+refs[1]+`"}`, same)
	require.Equal(t, 200, code, msg)
	now, err = sq.DeadValues(0, 0)
	require.NoError(t, err)
	require.Equal(t, ds[2:], now)
	bs, err = sq.TryPull(10)
	require.NoError(t, err)
	require.Len(t, bs, 1)
	require.Equal(t, "a", bs[0].Key, "the requeued value is pending again")
}
