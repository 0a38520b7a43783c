package redisq

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestWakeFromMsgKey: the calls of the one-message functions carry no
// channel, which they derive from the name of the msg key (publish in
// scripts/common.lua: the name less "2:msg", then "wake").
func TestWakeFromMsgKey(t *testing.T) {
	for _, name := range []string{"jobs", "a:b:c", "ünïcode", "2:msg"} {
		k := newKeys(name)
		msg := k.all[1]
		require.Equal(t, k.wake, msg[:len(msg)-len("2:msg")]+"wake", name)
	}
}
