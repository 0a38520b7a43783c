package redisq

import (
	"context"
	"errors"
	"io"
	"syscall"
)

// readTries is how many times a read is sent when its connection drops:
// the client sends nothing again (Open refuses one that would, see
// Options.AcceptDoubleRuns), so the handle sends again what is safe to
// run twice, a read, itself.
const readTries = 4

// dropped reports whether err is a connection that dropped before the
// reply came (closed, reset, broken): the command may have run, which a
// read makes harmless. A timeout is not one: its wait was bounded on
// purpose.
func dropped(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// readAgain runs read, and again, up to readTries times in all, while its
// connection drops and ctx lasts. Only for what changes nothing on the
// server.
func readAgain(ctx context.Context, read func() error) error {
	err := read()
	for try := 1; try < readTries && dropped(err) && ctx.Err() == nil; try++ {
		err = read()
	}
	return err
}
