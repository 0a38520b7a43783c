package main_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// visible are the commands the overview lists.
var visible = []string{"demo", "stats", "dump", "verify", "repair", "dlq list", "dlq show", "dlq requeue",
	"dlq purge", "enqueue", "dequeue", "ack", "nack", "extend", "requeue-expired", "compact"}

func TestHelp(t *testing.T) {
	r := mustWalq(t, 0, "", "help")
	for _, name := range visible {
		require.Contains(t, r.stdout, "  "+name+" ")
	}
	require.NotContains(t, r.stdout, "demo-child")
	require.Contains(t, r.stdout, "Exit status:")
	for _, name := range visible {
		t.Run(name, func(t *testing.T) {
			args := append(strings.Fields(name), "--help")
			r := mustWalq(t, 0, "", args...)
			require.Contains(t, r.stdout, "Usage: walq "+name)
			require.Contains(t, r.stdout, "Example:")
			require.Regexp(t, `Exit status:\n  0  \S+`, r.stdout)
			h := mustWalq(t, 0, "", append([]string{"help"}, strings.Fields(name)...)...)
			require.Equal(t, r.stdout, h.stdout)
		})
	}
}

func TestHelpGroup(t *testing.T) {
	r := mustWalq(t, 0, "", "help", "dlq")
	for _, sub := range []string{"list", "show", "requeue", "purge"} {
		require.Contains(t, r.stdout, "  "+sub+" ")
	}
	r = mustWalq(t, 1, "", "dlq")
	require.Contains(t, r.stderr, "Usage: walq dlq <command>")
	for _, flag := range []string{"--help", "-h"} { // every command takes --help, a group too
		r = mustWalq(t, 0, "", "dlq", flag)
		require.Contains(t, r.stdout, "Usage: walq dlq <command>")
	}
	mustWalq(t, 1, "", "help", "nosuch")
}

func TestUsageErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no command", nil, "Usage:"},
		{"unknown command", []string{"frobnicate"}, `unknown command "frobnicate"`},
		{"missing DIR", []string{"stats"}, "missing DIR"},
		{"extra argument", []string{"verify", "a", "b"}, `unexpected argument "b"`},
		{"unknown flag", []string{"dump", "--bogus", "d"}, "flag provided but not defined: -bogus"},
		{"bad receipt", []string{"ack", "d", "nope"}, `receipt "nope" is not seq.lease`},
		{"dlq without id or --all", []string{"dlq", "purge", "d"}, "name one dead letter ID or give --all"},
		{"not a queue", []string{"stats", "/nonexistent/walq"}, "no such directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := mustWalq(t, 1, "", tt.args...)
			require.Contains(t, r.stderr, tt.want)
			require.Empty(t, r.stdout)
		})
	}
}

// compact --help says what a partial compaction exits with.
func TestCompactHelpNamesPartialCompaction(t *testing.T) {
	r := mustWalq(t, 0, "", "compact", "--help")
	require.Contains(t, r.stdout, "copies only\nwhat lies below it, cuts the log there, and exits 2 (corrupt)")
}
