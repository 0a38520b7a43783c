package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
)

// splitTarget took the last path element as the queue's name as written,
// so no URL named a queue with a '/' in it, and team%2Fjobs named a
// queue called "team%2Fjobs". The name is now %-unescaped.
func TestSplitTarget(t *testing.T) {
	cases := []struct {
		target, server, name string
	}{
		{"redis://localhost:6379/0/jobs", "redis://localhost:6379/0", "jobs"},
		{"redis://localhost:6379/jobs", "redis://localhost:6379", "jobs"},
		{"redis://localhost:6379/0/team%2Fjobs", "redis://localhost:6379/0", "team/jobs"},
		{"redis://localhost:6379/0/50%25%20off", "redis://localhost:6379/0", "50% off"},
		{"redis://localhost:6379/0/a+b", "redis://localhost:6379/0", "a+b"},
		{"redis://localhost:6379/0/a%41", "redis://localhost:6379/0", "aA"},
		{"redis://localhost:6379/0/a%2541", "redis://localhost:6379/0", "a%41"},
		{"redis://localhost:6379/0/50%25off", "redis://localhost:6379/0", "50%off"},
		{"rediss://u:p%2Fw@host:6380/2/%C3%A9t%C3%A9", "rediss://u:p%2Fw@host:6380/2", "été"},
		{"redis://localhost:6379/0/jobs?protocol=3", "redis://localhost:6379/0?protocol=3", "jobs"},
		{"redis://localhost:6379/jobs?dial_timeout=1s&client_name=a/b", "redis://localhost:6379?dial_timeout=1s&client_name=a/b", "jobs"},
		{"redis://localhost:6379/0/a%3Fb", "redis://localhost:6379/0", "a?b"},
	}
	for _, c := range cases {
		t.Run(c.target, func(t *testing.T) {
			server, name, err := splitTarget(c.target)
			require.NoError(t, err)
			require.Equal(t, c.server, server)
			require.Equal(t, c.name, name)
		})
	}
	for _, bad := range []string{"redis://localhost:6379", "redis://localhost:6379/0/", "redis://localhost:6379/0/50%", "redis://localhost:6379/0/a%zz",
		"redis://localhost:6379/0/?protocol=3", "redis://localhost:6379?protocol=3"} {
		t.Run(bad, func(t *testing.T) {
			_, _, err := splitTarget(bad)
			require.ErrorIs(t, err, queue.ErrInvalidOptions)
		})
	}
}

// A query after the queue's name became part of the name:
// redis://host/0/jobs?protocol=3 named a queue "jobs?protocol=3", on a
// server reached without the option. The query now goes to the server's
// URL, which refuses an option it does not know.
func TestTargetQuery(t *testing.T) {
	rdb, name, err := client("redis://localhost:6379/0/jobs?protocol=3&dial_timeout=7s")
	require.NoError(t, err)
	defer rdb.Close()
	require.Equal(t, "jobs", name)
	require.Equal(t, 3, rdb.Options().Protocol)
	require.Equal(t, 7*time.Second, rdb.Options().DialTimeout)
	require.Equal(t, 0, rdb.Options().DB)

	_, _, err = client("redis://localhost:6379/0/jobs?x=1")
	require.ErrorIs(t, err, queue.ErrInvalidOptions)
	require.ErrorContains(t, err, "unexpected option: x")
}

// A raw '#' was taken into the queue's name: redis://host/0/jobs#stats,
// a URL whose fragment names nothing on the server, named a queue
// "jobs#stats" (which an enqueue would create), redis://host/0#jobs a
// queue "0#jobs" on database 0, and a '#' after the query went to
// go-redis, whose URL parser drops a fragment. A '#' has no meaning in a
// queue's URL but as part of a name, user, password or option's value,
// where it is written %23; a raw one is refused, whatever the user meant
// by it.
func TestTargetFragment(t *testing.T) {
	for _, bad := range []string{
		"redis://localhost:6379/0/jobs#stats",
		"redis://localhost:6379/0#jobs",
		"redis://localhost:6379/0/jobs#",
		"redis://localhost:6379/0/jobs?protocol=3#x",
		"redis://u:p#w@localhost:6379/0/jobs",
	} {
		t.Run(bad, func(t *testing.T) {
			_, _, err := splitTarget(bad)
			require.ErrorIs(t, err, queue.ErrInvalidOptions)
			require.ErrorContains(t, err, "%23")
		})
	}
	server, name, err := splitTarget("redis://u:p%23w@localhost:6379/0/a%23b")
	require.NoError(t, err)
	require.Equal(t, "redis://u:p%23w@localhost:6379/0", server)
	require.Equal(t, "a#b", name)
	rdb, name, err := client("redis://u%23s:p%23w@localhost:6379/0/a%23b?client_name=c%23d")
	require.NoError(t, err)
	defer rdb.Close()
	require.Equal(t, "a#b", name)
	require.Equal(t, "u#s", rdb.Options().Username)
	require.Equal(t, "p#w", rdb.Options().Password)
	require.Equal(t, "c#d", rdb.Options().ClientName)
}

// The client sends no command twice: go-redis's default retries would
// run a script call again after a connection dropped behind its run,
// and report the second run's outcome. A URL's max_retries still goes.
func TestTargetNoRetries(t *testing.T) {
	rdb, _, err := client("redis://localhost:6379/0/jobs")
	require.NoError(t, err)
	defer rdb.Close()
	require.Equal(t, 0, rdb.Options().MaxRetries) // -1 as given: none

	rdb, _, err = client("redis://localhost:6379/0/jobs?max_retries=5")
	require.NoError(t, err)
	defer rdb.Close()
	require.Equal(t, 5, rdb.Options().MaxRetries)
}
