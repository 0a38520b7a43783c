package queue

import "errors"

var (
	// ErrClosed is returned when the queue has been closed.
	ErrClosed = errors.New("queue: closed")
	// ErrEmpty is returned by TryDequeue and TryPull when nothing is ready
	// to deliver and the log is healthy; on a poisoned log they return the
	// error that poisoned it instead.
	ErrEmpty = errors.New("queue: empty")
	// ErrLeaseLost is returned when an ack, nack, extend or dead-letter
	// names a delivery that no longer owns its message: the lease expired
	// and the message went back to the queue (and perhaps to another
	// consumer), or it was already acked.
	ErrLeaseLost = errors.New("queue: lease lost")
	// ErrNotFound is returned when no message has the given id or receipt.
	ErrNotFound = errors.New("queue: message not found")
	// ErrDuplicate is returned when an enqueue reuses the id of a live
	// message or of one acked within the dedup window.
	ErrDuplicate = errors.New("queue: duplicate message id")
	// ErrTooLarge is returned when a message is larger than
	// Options.MaxMessageSize.
	ErrTooLarge = errors.New("queue: message too large")
	// ErrLocked is returned when another process has the directory open,
	// or a read-only handle or ReadLog (walq stats, dump, dlq list) holds
	// its lock shared (Options.ReadOnly).
	ErrLocked = errors.New("queue: directory locked by another process")
	// ErrWrongKind is returned when a directory is opened as a kind of
	// queue (or with a sort key type) other than the one it holds, or was
	// written in a format this release does not read.
	ErrWrongKind = errors.New("queue: directory holds another kind of queue")
	// ErrReadOnly is returned by a call that would change a queue opened
	// with Options.ReadOnly.
	ErrReadOnly = errors.New("queue: opened read-only")
	// ErrInvalidOptions is returned when Options or an argument is invalid.
	ErrInvalidOptions = errors.New("queue: invalid options")
	// ErrInvalidChange is returned when a change does not apply to the
	// state of what it names (a message or batch that is not where the
	// change needs it). The change is refused before anything is written,
	// and the queue goes on; replay reports such a record as ErrCorrupt.
	ErrInvalidChange = errors.New("queue: change does not apply")
	// ErrCorrupt is returned when the log or a snapshot fails its checks;
	// the error says where.
	ErrCorrupt = errors.New("queue: corrupt")
	// ErrLaterFront is returned, with ErrCorrupt, when the log directory
	// holds walq's own NAME.FRONT truncation marker from a later moment
	// than the snapshot (or than what a repair falls back to beside a
	// damaged one): finishing the truncation would remove records the
	// queue needs, so nothing was changed. Moving the marker out of the
	// log directory keeps every segment; a salvage (Options.Salvage) and a
	// repair refuse it too, since finishing the truncation would remove
	// intact records for good. The error names the marker.
	ErrLaterFront = errors.New("queue: truncation marker from a later moment than the snapshot")
	// ErrHousekeeper is returned by Close when it is called on the
	// queue's housekeeping goroutine, by a Logger handler of a background
	// event: Close waits for that goroutine, so it would wait for ever.
	// The queue stays open; start Close on a goroutine of its own.
	ErrHousekeeper = errors.New("queue: Close called on the housekeeping goroutine, which it waits for")
)
