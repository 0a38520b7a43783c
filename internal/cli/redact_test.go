package cli

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
)

func TestRedacted(t *testing.T) {
	cases := []struct{ target, want string }{
		{"/var/lib/jobs", "/var/lib/jobs"},
		{"jobs", "jobs"},
		{"redis://localhost:6379/0/jobs", "redis://localhost:6379/0/jobs"},
		{"redis://user@localhost:6379/0/jobs", "redis://user@localhost:6379/0/jobs"},
		{"redis://user:s3cret@localhost:6379/0/jobs", "redis://user:xxxxx@localhost:6379/0/jobs"},
		{"redis://:s3cret@localhost:6379/0/jobs?protocol=3", "redis://:xxxxx@localhost:6379/0/jobs?protocol=3"},
		{"rediss://u:s3%2Fcret@host:6380/2/team%2Fjobs", "rediss://u:xxxxx@host:6380/2/team%2Fjobs"},
		// Passwords that break the URL: hidden whole all the same.
		{"redis://u:s3/cret@host:6379/0/jobs", "redis://u:xxxxx@host:6379/0/jobs"},
		{"redis://u:s3@cret@host:6379/0/jobs", "redis://u:xxxxx@host:6379/0/jobs"},
		{"redis://u:s3#cret@host:6379/0/jobs", "redis://u:xxxxx@host:6379/0/jobs"},
		{"http://u:s3cret@host:bad/", "http://u:xxxxx@host:bad/"},
		// Passwords that leave the URL parsable, digits before a raw '/',
		// '?' or '#' read as a port: hidden whole when a host and port
		// follow the '@' (a port or a path after it).
		{"redis://u:123/456@host:6379/0/jobs", "redis://u:xxxxx@host:6379/0/jobs"},
		{"redis://u:123?456@host:6379/0/jobs", "redis://u:xxxxx@host:6379/0/jobs"},
		{"redis://u:123#456@host:6379/0/jobs", "redis://u:xxxxx@host:6379/0/jobs"},
		{"redis://u:123/456@host/0/jobs", "redis://u:xxxxx@host/0/jobs"},
		// An '@' in a queue's name is no password.
		{"redis://host:6379/0/a@b", "redis://host:6379/0/a@b"},
		{"redis://host:6379/0/a@b?protocol=3", "redis://host:6379/0/a@b?protocol=3"},
		{"redis://host:6379/0/jobs?client_name=a@b", "redis://host:6379/0/jobs?client_name=a@b"},
		{"redis://host/0/a:b@c", "redis://host/0/a:b@c"},
	}
	for _, c := range cases {
		t.Run(c.target, func(t *testing.T) {
			assert.Equal(t, c.want, Redacted(c.target))
		})
	}
}

// passwordEngine owns "stub://" URLs: the queue in dir, a sorted one when
// the URL ends in /sorted; a URL with /damaged in it fails to open with
// ErrCorrupt.
type passwordEngine struct{ dir string }

func (passwordEngine) Owns(target string) bool { return strings.HasPrefix(target, "stub://") }
func (passwordEngine) Form() string            { return "stub://[user:password@]host/NAME" }

func (e passwordEngine) Open(_ context.Context, target string, _ EngineOptions) (queue.AckQueue, error) {
	if strings.Contains(target, "/damaged") {
		return nil, fmt.Errorf("%w: record at LSN 4", queue.ErrCorrupt)
	}
	return queue.Open(e.dir, nil)
}

func (e passwordEngine) OpenSorted(_ context.Context, target string, _ EngineOptions) (any, error) {
	if strings.Contains(target, "/damaged") {
		return nil, fmt.Errorf("%w: record at LSN 4", queue.ErrCorrupt)
	}
	if !strings.HasSuffix(target, "/sorted") {
		return nil, nil
	}
	return queue.OpenSorted[int64](e.dir, nil)
}

// The commands printed a queue's URL as given, password and all: stats
// on stdout ("queue redis://user:PASSWORD@host/0/jobs", and its JSON),
// the errors of an open ("open redis://user:PASSWORD@...: ...") and the
// hint after them, the demo's lines, --url's refusal. Logs and terminals
// that show a command's output kept the password. Every URL is now shown
// with its password replaced by xxxxx.
func TestURLPasswordNotShown(t *testing.T) {
	const secret = "s3cret"
	cases := []struct {
		name string
		args []string
	}{
		{"stats ack", []string{"stats", "stub://u:" + secret + "@host/0/jobs"}},
		{"stats ack json", []string{"stats", "--json", "stub://u:" + secret + "@host/0/jobs"}},
		{"stats sorted", []string{"stats", "stub://u:" + secret + "@host/0/sorted"}},
		{"stats sorted json", []string{"stats", "--json", "stub://u:" + secret + "@host/0/sorted"}},
		{"stats damaged", []string{"stats", "stub://u:" + secret + "@host/0/damaged"}},
		{"enqueue damaged", []string{"enqueue", "stub://u:" + secret + "@host/0/damaged", "x"}},
		{"dlq list damaged", []string{"dlq", "list", "stub://u:" + secret + "@host/0/damaged"}},
		{"demo damaged", []string{"demo", "--redis", "stub://u:" + secret + "@host/0/damaged"}},
		{"demo not owned", []string{"demo", "--redis", "nostub://u:" + secret + "@host/0"}},
		{"stats --url", []string{"stats", "--url", "http://u:" + secret + "@host:bad/"}},
		{"verify", []string{"verify", "stub://u:" + secret + "@host/0/jobs"}},
		{"repair", []string{"repair", "stub://u:" + secret + "@host/0/jobs"}},
		{"dump", []string{"dump", "stub://u:" + secret + "@host/0/jobs"}},
		{"compact", []string{"compact", "stub://u:" + secret + "@host/0/jobs"}},
		{"stats not owned", []string{"stats", "nostub://u:" + secret + "@host/0/jobs"}},
		{"verify not owned", []string{"verify", "nostub://u:" + secret + "@host/0/jobs"}},
		{"repair not owned", []string{"repair", "nostub://u:" + secret + "@host/0/jobs"}},
		{"extra argument", []string{"stats", "stub://u:" + secret + "@host/0/jobs", "stub://u:" + secret + "@host/0/more"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if strings.HasSuffix(c.args[len(c.args)-1], "/sorted") {
				s, err := queue.OpenSorted[int64](dir, nil)
				require.NoError(t, err)
				require.NoError(t, s.Close())
			}
			var out, errOut bytes.Buffer
			e := &env{stdin: strings.NewReader(""), stdout: &out, stderr: &errOut, engine: passwordEngine{dir: dir}}
			code := run(e, c.args)
			shown := out.String() + errOut.String()
			t.Logf("exit %d\n%s", code, shown)
			assert.NotContains(t, shown, secret)
			assert.Contains(t, shown, "u:xxxxx@host", "the URL is shown, its password redacted")
		})
	}
}
