package recovery

import (
	"errors"
	"fmt"
	"io"

	"github.com/walq/walq/wal"
)

// Replay reads every record of log from LSN from onward, in order, and
// passes it to apply. It stops at the end of the log and returns how many
// records it applied, or at the first error, wrapped with the record's LSN.
func Replay(log *wal.Log, from uint64, apply func(lsn uint64, rec []byte) error) (int, error) {
	r := log.NewReader(from)
	defer r.Close()
	n := 0
	for {
		lsn, rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, fmt.Errorf("recovery: replay from LSN %d: %w", from, err)
		}
		if err := apply(lsn, rec); err != nil {
			return n, fmt.Errorf("recovery: apply LSN %d: %w", lsn, err)
		}
		n++
	}
}
