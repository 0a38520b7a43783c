package redisq

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/redisq/internal/redistest"
)

// missing took any error with "Function not found" anywhere in its text
// for the server's reply that it lacks the library, so an error a
// function raised with those words made the handle load the library and
// run the call again. Only the server's exact reply counts now.
func TestMissingIsTheServersReply(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	require.NoError(t, rdb.FunctionLoadReplace(ctx, "#!lua name=missingtest\n"+
		"redis.register_function('missingtest_raise', function(keys, args) return redis.error_reply(args[1]) end)").Err())
	reply := func(fn string, args ...any) error {
		t.Helper()
		err := rdb.FCall(ctx, fn, nil, args...).Err()
		require.Error(t, err)
		return err
	}
	notFound := reply("missingtest_nosuch")
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"the server's reply", notFound, true},
		{"the server's reply, wrapped", fmt.Errorf("redisq: stats: %w", notFound), true},
		{"the read-only call's reply", rdb.FCallRO(ctx, "missingtest_nosuch", nil).Err(), true},
		{"raised by a function, longer", reply("missingtest_raise", "ERR Function not found in the table"), false},
		{"raised by a function, other code", reply("missingtest_raise", "WRONGTYPE Function not found"), false},
		{"the words in a client error", errors.New("ERR Function not found"), false},
		{"another server error", reply("missingtest_raise", "ERR something else"), false},
		{"no error", nil, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			require.Equal(t, c.want, missing(c.err), "%v", c.err)
		})
	}
}
