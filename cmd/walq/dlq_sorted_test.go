package main_test

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walq/walq/queue"
)

// TestSortedDeadName: dlq list and show name a sorted queue's dead value
// SEQ@PUBLISHED_UNIX_NS; show, requeue and purge take that name, refuse
// it (exit 5, the value left dead) when its seq holds a value published at
// another time, as after a power loss that gave the seq to a new publish,
// and still take a bare seq.
func TestSortedDeadName(t *testing.T) {
	dir := sortedQueue(t)
	lines := strings.Split(strings.TrimSpace(mustWalq(t, 0, "", "dlq", "list", dir).stdout), "\n")
	require.Len(t, lines, 2)
	require.Regexp(t, `^ID\s+SEQ\s+KEY\s+SORT\s+DELIVERIES\s+PUBLISHED\s+BYTES\s+REASON$`, lines[0])
	m := regexp.MustCompile(`^(1@(\d+))\s+1\s+bad\s+-7\s+1\s+\S+\s+12\s+cannot parse$`).FindStringSubmatch(lines[1])
	require.NotNil(t, m, lines[1])
	name := m[1]
	at, err := strconv.ParseInt(m[2], 10, 64)
	require.NoError(t, err)
	published := deadPublishedAt(t, dir)
	require.Equal(t, published, at, "the name carries the publish time in unix ns")

	var j struct {
		ID  string `json:"id"`
		Seq uint64 `json:"seq"`
	}
	require.NoError(t, json.Unmarshal([]byte(mustWalq(t, 0, "", "dlq", "list", "--json", dir).stdout), &j))
	require.Equal(t, name, j.ID)
	require.Equal(t, uint64(1), j.Seq)
	show := mustWalq(t, 0, "", "dlq", "show", dir, name).stdout
	require.True(t, strings.HasPrefix(show, "id:         "+name+"\nseq:        1\nkey:        bad\n"), show)
	require.Equal(t, show, mustWalq(t, 0, "", "dlq", "show", dir, "1").stdout, "a bare seq shows the same value")

	stale := "1@" + strconv.FormatInt(at+1, 10)
	for _, args := range [][]string{{"show", dir, stale}, {"requeue", dir, stale}, {"purge", dir, stale}} {
		r := mustWalq(t, 5, "", append([]string{"dlq"}, args...)...)
		require.Contains(t, r.stderr, "no dead value 1 published at", "walq dlq %v", args)
		require.Contains(t, r.stderr, "walq dlq list", "walq dlq %v", args)
		require.Empty(t, r.stdout)
	}
	for _, bad := range []string{"1@", "1@x", "@5", "0@5", "x"} {
		r := mustWalq(t, 1, "", "dlq", "requeue", dir, bad)
		require.Contains(t, r.stderr, "SEQ@PUBLISHED_UNIX_NS", "name %q", bad)
	}
	require.Equal(t, published, deadPublishedAt(t, dir), "a refused name left the value dead")

	require.Equal(t, "requeued "+name+"\n", mustWalq(t, 0, "", "dlq", "requeue", dir, name).stdout)
	r := mustWalq(t, 5, "", "dlq", "purge", dir, name)
	require.Contains(t, r.stderr, "no dead value 1")
	sq, err := queue.OpenSorted[int64](dir, nil)
	require.NoError(t, err)
	bs, err := sq.TryPull(10)
	require.NoError(t, err)
	require.Equal(t, "bad", bs[0].Key, "the requeued value is pending again")
	require.NoError(t, bs[0].DeadLetter("again"))
	require.NoError(t, sq.Close())
	require.Equal(t, "purged "+name+"\n", mustWalq(t, 0, "", "dlq", "purge", dir, name).stdout)
	require.Equal(t, "ID  SEQ  KEY  SORT  DELIVERIES  PUBLISHED  BYTES  REASON\n", mustWalq(t, 0, "", "dlq", "list", dir).stdout)
}

// deadPublishedAt returns the publish time, in unix ns, of the one dead
// value of the sorted queue in dir, as the library reads it.
func deadPublishedAt(t *testing.T, dir string) int64 {
	t.Helper()
	sq, err := queue.OpenSorted[int64](dir, &queue.SortedOptions{Options: queue.Options{ReadOnly: true}})
	require.NoError(t, err)
	defer sq.Close()
	ds, err := sq.DeadValues(0, 0)
	require.NoError(t, err)
	require.Len(t, ds, 1)
	return ds[0].PublishedAt.UnixNano()
}
