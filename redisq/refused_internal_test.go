package redisq

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRefused: only the server's own replies that it did not run the
// command count as refusals, however wrapped; an error a function
// raised, a reply with another code, a dropped connection and an ended
// context are not, whatever words their text holds.
func TestRefused(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{reply("MOVED 9497 127.0.0.1:7001"), true},
		{reply("ASK 9497 127.0.0.1:7001"), true},
		{reply("TRYAGAIN Multiple keys request during rehashing of slot"), true},
		{reply("CLUSTERDOWN The cluster is down"), true},
		{reply("CLUSTERDOWN Hash slot not served"), true},
		{reply("READONLY You can't write against a read only replica."), true},
		{reply("LOADING Redis is loading the dataset in memory"), true},
		{fmt.Errorf("call: %w", reply("MOVED 1 127.0.0.1:7001")), true},
		{reply("DUPLICATE MOVED 1 x"), false},
		{reply("ERR Error running script: TRYAGAIN"), false},
		{reply("OOM command not allowed when used memory > 'maxmemory'."), false},
		{reply("MOVEDX 1 x"), false},
		{errors.New("MOVED 1 127.0.0.1:7001"), false},
		{fmt.Errorf("read: %w", io.EOF), false},
		{fmt.Errorf("%w: TRYAGAIN x", context.DeadlineExceeded), false},
		{nil, false},
	} {
		name := "nil"
		if c.err != nil {
			name = c.err.Error()
		}
		t.Run(name, func(t *testing.T) {
			require.Equal(t, c.want, refused(c.err))
		})
	}
}
