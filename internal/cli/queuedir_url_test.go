package cli

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A queue URL given to a walq that links no engine for it must not become
// a local queue directory spelt from the URL (password and all) with the
// command reporting success.
func TestURLNotCreatedAsDirectory(t *testing.T) {
	for _, args := range [][]string{
		{"enqueue", "redis://app:s3cret@host:6379/0/jobs", "x"},
		{"enqueue", "rediss://host/0/jobs", "x"},
	} {
		t.Run(args[1], func(t *testing.T) { requireURLRefused(t, args, "walq-redis") })
	}
}

// requireURLRefused runs args, given a queue URL with a password, in an
// empty working directory of a walq that links no engine, and requires
// that the command fails, says want, shows no password and creates no
// file.
func requireURLRefused(t *testing.T, args []string, want string) {
	t.Helper()
	chdir(t, t.TempDir())
	var out, errOut bytes.Buffer
	e := &env{stdin: strings.NewReader(""), stdout: &out, stderr: &errOut}
	code := run(e, args)
	shown := out.String() + errOut.String()
	assert.NotEqual(t, 0, code, "the command reported success: %s", shown)
	assert.Contains(t, shown, want)
	assert.NotContains(t, shown, "s3cret")
	des, err := os.ReadDir(".")
	require.NoError(t, err)
	assert.Empty(t, des, "the command created files from the URL")
}

func TestLooksLikeURL(t *testing.T) {
	for target, want := range map[string]bool{
		"redis://h/0/q":      true,
		"unix+tls://x":       true,
		"queue":              false,
		"./data/queue":       false,
		"://x":               false,
		"1abc://x":           false,
		"dir with :// in it": false,
	} {
		assert.Equal(t, want, looksLikeURL(target), target)
	}
}

// chdir makes dir the working directory until t ends (the module's Go
// version predates testing.T.Chdir). No test of this package runs in
// parallel.
func chdir(t *testing.T, dir string) {
	t.Helper()
	old, err := os.Getwd()
	require.NoError(t, err)
	require.NoError(t, os.Chdir(dir))
	t.Cleanup(func() { require.NoError(t, os.Chdir(old)) })
}

// A queue URL given to a walq that links no engine for it, to a command
// that opens an existing queue, says that walq-redis opens it, not only
// that no such directory exists, and shows no password.
func TestURLNamesTheBuildThatOpensIt(t *testing.T) {
	const url = "redis://app:s3cret@host:6379/0/jobs"
	for _, args := range [][]string{
		{"stats", url}, {"dump", url}, {"verify", url}, {"compact", url},
		{"dlq", "list", url}, {"dlq", "show", url, "id-1"}, {"dlq", "requeue", "--all", url}, {"dlq", "purge", "--all", url},
		{"dequeue", url}, {"ack", url, "1.2"}, {"nack", url, "1.2"}, {"extend", url, "1.2"}, {"requeue-expired", url},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			requireURLRefused(t, args, "walq-redis opens redis:// and rediss:// queues")
		})
	}
}

// A build that opens queues by URL (an engine linked in) given a URL its
// engine does not own says no such queue, and not that it opens none by
// URL, which would send its user to look for another build.
func TestURLNotOwnedByTheEngine(t *testing.T) {
	const url = "http://host/jobs"
	for _, args := range [][]string{{"stats", url}, {"dequeue", url}, {"enqueue", url, "x"}} {
		t.Run(args[0], func(t *testing.T) {
			chdir(t, t.TempDir())
			var out, errOut bytes.Buffer
			e := &env{stdin: strings.NewReader(""), stdout: &out, stderr: &errOut, engine: passwordEngine{dir: t.TempDir()}}
			code := run(e, args)
			shown := out.String() + errOut.String()
			assert.NotEqual(t, 0, code, "the command reported success: %s", shown)
			assert.NotContains(t, shown, "opens no queue by URL")
			assert.Contains(t, shown, "rediss://")
			des, err := os.ReadDir(".")
			require.NoError(t, err)
			assert.Empty(t, des, "the command created files from the URL")
		})
	}
}
