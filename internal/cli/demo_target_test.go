package cli

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
)

// targetEngine owns "stub://" URLs, records the target it is asked to
// open and opens nothing.
type targetEngine struct{ opened *string }

func (targetEngine) Owns(target string) bool { return strings.HasPrefix(target, "stub://") }
func (targetEngine) Form() string            { return "stub://host/NAME[?OPTIONS]" }

func (e targetEngine) Open(_ context.Context, target string, _ EngineOptions) (queue.AckQueue, error) {
	*e.opened = target
	return nil, errors.New("not opened")
}

// demo --redis URL appended the demo queue's name to the URL as written,
// so a query in it (?protocol=3) swallowed the name. The name now goes
// before the query, which stays the server's.
func TestDemoTargetKeepsQuery(t *testing.T) {
	for server, want := range map[string]string{
		"stub://host:6379/0":            "stub://host:6379/0/walq-demo-",
		"stub://host:6379/0/":           "stub://host:6379/0/walq-demo-",
		"stub://host:6379/0?protocol=3": "stub://host:6379/0/walq-demo-",
	} {
		t.Run(server, func(t *testing.T) {
			var opened string
			var out, errOut bytes.Buffer
			e := &env{stdin: strings.NewReader(""), stdout: &out, stderr: &errOut, engine: targetEngine{&opened}}
			require.NotEqual(t, exitOK, run(e, []string{"demo", "--redis", server}))
			require.True(t, strings.HasPrefix(opened, want), "opened %q", opened)
			_, query, _ := strings.Cut(server, "?")
			_, got, _ := strings.Cut(opened, "?")
			require.Equal(t, query, got, "the query of %q in %q", server, opened)
			require.NotContains(t, strings.TrimPrefix(opened, want), "/", "the name is the last path element")
		})
	}
}
