package main

import (
	"testing"

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
	}
	for _, c := range cases {
		t.Run(c.target, func(t *testing.T) {
			server, name, err := splitTarget(c.target)
			require.NoError(t, err)
			require.Equal(t, c.server, server)
			require.Equal(t, c.name, name)
		})
	}
	for _, bad := range []string{"redis://localhost:6379", "redis://localhost:6379/0/", "redis://localhost:6379/0/50%", "redis://localhost:6379/0/a%zz"} {
		t.Run(bad, func(t *testing.T) {
			_, _, err := splitTarget(bad)
			require.ErrorIs(t, err, queue.ErrInvalidOptions)
		})
	}
}
