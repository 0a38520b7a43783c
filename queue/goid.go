package queue

import (
	"bytes"
	"runtime"
	"strconv"
)

// goroutineID returns the id of the calling goroutine, read from the first
// line of its stack trace ("goroutine 42 [running]:"); 0 if that line
// cannot be read. Close compares it with the housekeeper's, which it
// waits for, to refuse a call made on that goroutine (a Logger handler of
// a background event) instead of waiting for ever.
func goroutineID() uint64 {
	var buf [64]byte
	b := bytes.TrimPrefix(buf[:runtime.Stack(buf[:], false)], []byte("goroutine "))
	i := bytes.IndexByte(b, ' ')
	if i < 0 {
		return 0
	}
	id, err := strconv.ParseUint(string(b[:i]), 10, 64)
	if err != nil {
		return 0
	}
	return id
}
