package redisq

import (
	"context"
	"errors"
	"io"
	"syscall"
)

// sendTries is how many times a command is sent when its connection
// drops: the client sends nothing again (Open refuses one that would, see
// Options.AcceptDoubleRuns), so the handle sends again what is safe to
// run twice itself.
const sendTries = 4

// dropped reports whether err is a connection that dropped before the
// reply came (closed, reset, broken): the command may have run, which a
// read makes harmless. A timeout is not one: its wait was bounded on
// purpose.
func dropped(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// sendAgain runs send, and again, up to sendTries times in all, while its
// connection drops and ctx lasts. Only for a command whose second run
// leaves the server as its first left it, and replies as the first would
// have: a read (a no-writes function, CONFIG GET, GET, HGET), FUNCTION
// LOAD of the same code, an HSETNX whose field is read back after it, the
// function that writes nothing (writable.go), SUBSCRIBE.
func sendAgain(ctx context.Context, send func() error) error {
	err := send()
	for try := 1; try < sendTries && dropped(err) && ctx.Err() == nil; try++ {
		err = send()
	}
	return err
}
