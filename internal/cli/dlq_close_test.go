package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
)

// errCloseFailed is the error of the close of closeFailing.
var errCloseFailed = errors.New("close failed on purpose")

// closeFailing is a sorted queue whose Close fails once it closed it.
type closeFailing struct{ *queue.Sorted[int64] }

func (c closeFailing) Close() error {
	if err := c.Sorted.Close(); err != nil {
		return err
	}
	return errCloseFailed
}

// closeFailingEngine owns the targets "fail://…" and opens each as the
// sorted queue in dir, whose close fails.
type closeFailingEngine struct{ dir string }

func (closeFailingEngine) Owns(target string) bool { return strings.HasPrefix(target, "fail://") }
func (closeFailingEngine) Form() string            { return "fail://NAME" }

func (closeFailingEngine) Open(context.Context, string, EngineOptions) (queue.AckQueue, error) {
	return nil, errors.New("no ack queue here")
}

func (e closeFailingEngine) OpenSorted(context.Context, string, EngineOptions) (any, error) {
	s, err := queue.OpenSorted[int64](e.dir, nil)
	if err != nil {
		return nil, err
	}
	return closeFailing{s}, nil
}

// TestDLQSortedReportsCloseError: dlq list, show, requeue and purge of a
// sorted queue that did their work report the error of the queue's close,
// and exit with failure: a close that fails may not have kept what the
// command changed.
func TestDLQSortedReportsCloseError(t *testing.T) {
	for _, args := range [][]string{
		{"dlq", "list"},
		{"dlq", "list", "--json"},
		{"dlq", "show", "SEQ"},
		{"dlq", "requeue", "SEQ"},
		{"dlq", "requeue", "--all"},
		{"dlq", "purge", "SEQ"},
		{"dlq", "purge", "--all"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			dir := t.TempDir()
			seq := deadValueIn(t, dir)
			var out, errOut bytes.Buffer
			e := &env{stdin: strings.NewReader(""), stdout: &out, stderr: &errOut, engine: closeFailingEngine{dir}}
			line := []string{args[0], args[1], "fail://q"}
			for _, a := range args[2:] {
				line = append(line, strings.ReplaceAll(a, "SEQ", fmt.Sprint(seq)))
			}
			code := run(e, line)
			require.NotEqual(t, exitOK, code, "stdout: %s", out.String())
			require.Contains(t, errOut.String(), errCloseFailed.Error())
		})
	}
}

// deadValueIn makes dir a sorted queue with one dead value, and returns
// its sequence number.
func deadValueIn(t *testing.T, dir string) uint64 {
	t.Helper()
	s, err := queue.OpenSorted[int64](dir, nil)
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.Publish(context.Background(), 1, "k", []byte("v")))
	bs, err := s.TryPull(1)
	require.NoError(t, err)
	require.NoError(t, bs[0].DeadLetter("bad"))
	ds, err := s.DeadValues(0, 0)
	require.NoError(t, err)
	require.Len(t, ds, 1)
	return ds[0].Seq
}
