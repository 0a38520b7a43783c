package recovery

import "errors"

var (
	// ErrCorrupt is returned when a snapshot file fails its checks.
	ErrCorrupt = errors.New("recovery: corrupt snapshot")
	// ErrNoSnapshot is returned by Latest when the directory holds none.
	ErrNoSnapshot = errors.New("recovery: no snapshot")
)
