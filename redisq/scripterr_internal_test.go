package redisq

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
)

// reply is an error reply of the server, as the client hands it over.
type reply string

func (r reply) Error() string { return string(r) }
func (reply) RedisError()     {}

// TestScriptErrByCode: every error reply the functions raise maps to its
// sentinel, and any other reply, the server's own included (OOM,
// NOSCRIPT, READONLY after a failover, BUSY, LOADING, ...), comes back as
// itself, wrapped, whatever words its text holds; an error that is no
// reply (a dropped connection, an ended context) is never read for codes.
func TestScriptErrByCode(t *testing.T) {
	for _, c := range []struct {
		err  error
		want error // the sentinel, nil for none
		text string
	}{
		{reply("DUPLICATE id-1"), queue.ErrDuplicate, `"id-1"`},
		{reply("DUPLICATE KEYTYPE x"), queue.ErrDuplicate, `"KEYTYPE x"`},
		{fmt.Errorf("call: %w", reply("DUPLICATE id-1")), queue.ErrDuplicate, `"id-1"`},
		{reply("KEYTYPE the queue holds sort keys of another type than this handle's"), queue.ErrInvalidOptions, "another type than this handle's"},
		{reply("WRONGTYPE queue key walq:{KEYTYPE DUPLICATE}:2:ready holds another type, not a zset"), nil, "WRONGTYPE"},
		{reply(`COUNTER queue key walq:{DUPLICATE}:2:stats field nacked holds "x", not a count`), queue.ErrCorrupt,
			`queue key walq:{DUPLICATE}:2:stats field nacked holds "x", not a count`},
		{fmt.Errorf("call: %w", reply(`COUNTER queue key walq:{q}:2:seq holds "x"`)), queue.ErrCorrupt, `walq:{q}:2:seq holds "x"`},
		{reply("OOM command not allowed when used memory > 'maxmemory'."), nil, "OOM"},
		{reply("NOSCRIPT No matching script."), nil, "NOSCRIPT"},
		{reply("READONLY You can't write against a read only replica."), nil, "READONLY"},
		{reply("BUSY Redis is busy running a script."), nil, "BUSY"},
		{reply("LOADING Redis is loading the dataset in memory"), nil, "LOADING"},
		{reply("ERR Function not found"), nil, "ERR"},
		{reply("DUPLICATEX id"), nil, "DUPLICATEX"},
		{errors.New("DUPLICATE id-1"), nil, "DUPLICATE"},
		{fmt.Errorf("read: %w: KEYTYPE x", context.DeadlineExceeded), nil, "KEYTYPE"},
	} {
		t.Run(c.err.Error(), func(t *testing.T) {
			err := scriptErr("op", c.err)
			require.ErrorContains(t, err, c.text)
			if c.want != nil {
				require.ErrorIs(t, err, c.want)
				return
			}
			require.NotErrorIs(t, err, queue.ErrDuplicate)
			require.NotErrorIs(t, err, queue.ErrInvalidOptions)
			require.NotErrorIs(t, err, queue.ErrCorrupt)
			require.ErrorIs(t, err, c.err, "wrapped")
			var re redis.Error
			if errors.As(c.err, &re) {
				require.True(t, errors.As(err, &re), "still a reply")
			}
		})
	}
	require.NoError(t, scriptErr("op", nil))
	require.Same(t, queue.ErrClosed, scriptErr("op", queue.ErrClosed))
}
