package recovery

import "errors"

var (
	// ErrCorrupt is returned when a snapshot file fails its checks.
	ErrCorrupt = errors.New("recovery: corrupt snapshot")
	// ErrLogMissing is returned when the log does not reach back to what
	// the snapshot needs: a segment was lost.
	ErrLogMissing = errors.New("recovery: log records missing")
	// ErrNoSnapshot is returned by Latest when the directory holds none.
	ErrNoSnapshot = errors.New("recovery: no snapshot")
)
