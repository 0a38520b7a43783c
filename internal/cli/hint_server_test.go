package cli

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/walq/walq/queue"
)

// A queue on a server that reports damage (queue.ErrCorrupt) was given the
// hint of a damaged directory: "run 'walq verify URL' ... and 'walq repair
// URL'", which read a directory and cannot run on a server's queue. Its
// hint now says so, and a directory's keeps the advice.
func TestCorruptHintFitsTheQueue(t *testing.T) {
	for _, c := range []struct {
		name string
		args []string
	}{
		{"stats", []string{"stats", "stub://u:pw@host/0/damaged"}},
		{"enqueue", []string{"enqueue", "stub://host/0/damaged", "x"}},
		{"dlq list", []string{"dlq", "list", "stub://host/0/damaged"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			e := &env{stdin: strings.NewReader(""), stdout: &out, stderr: &errOut, engine: passwordEngine{dir: t.TempDir()}}
			assert.Equal(t, exitCorrupt, run(e, c.args))
			_, h, ok := strings.Cut(errOut.String(), "\nhint: ")
			assert.True(t, ok, "a hint is given:\n%s", errOut.String())
			assert.NotContains(t, h, "walq verify stub:")
			assert.NotContains(t, h, "walq repair stub:")
			assert.Contains(t, h, "is a queue on a server")
		})
	}
	h := hint(fmt.Errorf("%w: record at LSN 4", queue.ErrCorrupt), "stats", "/var/lib/jobs", false)
	assert.Contains(t, h, "'walq verify /var/lib/jobs'", "a directory's hint")
}
