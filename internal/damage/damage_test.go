package damage_test

import (
	"errors"
	"fmt"
	"io"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/internal/damage"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/wal"
)

func TestIs(t *testing.T) {
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"queue damage", fmt.Errorf("%w: record at LSN 4", queue.ErrCorrupt), true},
		{"log damage", fmt.Errorf("queue: stats: %w", wal.ErrCorrupt), true},
		{"damage beside a read error", errors.Join(syscall.EIO, wal.ErrCorrupt), true},
		{"disk error", fmt.Errorf("queue: stats: read segment: %w", syscall.EIO), false},
		{"cut short", io.ErrUnexpectedEOF, false},
		{"closed", queue.ErrClosed, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			require.Equal(t, c.want, damage.Is(c.err))
		})
	}
}
