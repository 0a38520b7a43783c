package redisq

import (
	"github.com/vmihailenco/msgpack/v5"
	"github.com/walq/walq/internal/msgframe"
)

// unmarshalStored decodes the msgpack record raw, read from the server,
// into v. msgpack.Unmarshal allocates the length a bin header announces
// before it reads the bytes: a damaged record of 20 bytes claiming a
// bin32 of 2 GiB would cost 2 GiB each time it is read (by Dequeue, Pull,
// DeadLetters or DeadValues). So the framing is checked first
// (internal/msgframe): every length must fit in what follows it.
func unmarshalStored(raw string, v any) error {
	if err := msgframe.Check([]byte(raw)); err != nil {
		return err
	}
	return msgpack.Unmarshal([]byte(raw), v)
}
