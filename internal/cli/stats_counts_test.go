package cli

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/wal"
)

// uncountedAck is a queue whose counts could not be read from its log.
type uncountedAck struct {
	*queue.Queue
	countsErr, oldestErr error
}

func (q uncountedAck) Stats() queue.Stats {
	s := q.Queue.Stats()
	s.CountsErr, s.OldestErr = q.countsErr, q.oldestErr
	return s
}

// uncountedSorted is a sorted queue whose counts could not be read from
// its log.
type uncountedSorted struct {
	*queue.Sorted[int64]
	countsErr, oldestErr error
}

func (s uncountedSorted) Stats() queue.Stats {
	st := s.Sorted.Stats()
	st.CountsErr, st.OldestErr = s.countsErr, s.oldestErr
	return st
}

// uncountedEngine owns "stub://ack" and "stub://sorted": queues in dir
// whose Stats says their counts could not be read.
type uncountedEngine struct {
	dir                  string
	countsErr, oldestErr error
}

func (uncountedEngine) Owns(target string) bool { return strings.HasPrefix(target, "stub://") }
func (uncountedEngine) Form() string            { return "stub://NAME" }

func (e uncountedEngine) Open(context.Context, string, EngineOptions) (queue.AckQueue, error) {
	q, err := queue.Open(e.dir, nil)
	if err != nil {
		return nil, err
	}
	return uncountedAck{q, e.countsErr, e.oldestErr}, nil
}

func (e uncountedEngine) OpenSorted(_ context.Context, target string, _ EngineOptions) (any, error) {
	if target != "stub://sorted" {
		return nil, nil
	}
	s, err := queue.OpenSorted[int64](e.dir, nil)
	if err != nil {
		return nil, err
	}
	return uncountedSorted{s, e.countsErr, e.oldestErr}, nil
}

// stats of an engine's queue exited 0 when Stats said the counts could
// not be read from the log (Stats.CountsErr), so a script took counts that
// include failed writes for the log's. It now prints the figures, says
// why under them, and exits 2 for damage and 1 for another read error, as
// stats --url does with counts_error.
func TestStatsCountsErrExit(t *testing.T) {
	damage := fmt.Errorf("%w: record at LSN 4", queue.ErrCorrupt)
	cases := []struct {
		name           string
		counts, oldest error
		want           int
	}{
		{"counts read", nil, nil, exitOK},
		{"counts damaged", damage, nil, exitCorrupt},
		{"log damaged", fmt.Errorf("queue: read back: %w", wal.ErrCorrupt), nil, exitCorrupt},
		{"counts read error", fmt.Errorf("read segment: %w", syscall.EIO), nil, exitFailure},
		{"counts read error, oldest damaged", fmt.Errorf("read segment: %w", syscall.EIO), damage, exitCorrupt},
	}
	for _, c := range cases {
		for _, kind := range []string{"ack", "sorted"} {
			for _, form := range [][]string{nil, {"--json"}} {
				t.Run(c.name+" "+kind+strings.Join(form, ""), func(t *testing.T) {
					dir := t.TempDir()
					if kind == "ack" {
						q, err := queue.Open(dir, nil)
						require.NoError(t, err)
						_, err = q.Enqueue(context.Background(), []byte("x"))
						require.NoError(t, err)
						require.NoError(t, q.Close())
					}
					var out, errOut bytes.Buffer
					e := &env{stdin: strings.NewReader(""), stdout: &out, stderr: &errOut,
						engine: uncountedEngine{dir: dir, countsErr: c.counts, oldestErr: c.oldest}}
					code := run(e, append(append([]string{"stats"}, form...), "stub://"+kind))
					assert.Equal(t, c.want, code, "stdout:\n%s\nstderr:\n%s", out.String(), errOut.String())
					assert.Contains(t, out.String(), "stub://"+kind, "the figures are printed")
					if c.counts != nil {
						assert.Contains(t, errOut.String(), c.counts.Error())
						if form == nil {
							assert.Contains(t, out.String(), "counts not checked: ")
						} else {
							assert.Contains(t, out.String(), `"counts_error": `)
						}
					}
				})
			}
		}
	}
}
