package dashboard

import (
	"context"
	"errors"
	"time"
)

// Source is what the dashboard shows. Implementations must be safe for
// concurrent use and must not change the queue when read.
type Source interface {
	// Stats returns the queue's current figures.
	Stats(ctx context.Context) (Stats, error)
	// Messages returns up to limit messages in state (one of States) after
	// the page position after ("" for the first page), and the position of
	// the next page in Page.Next ("" when there is none).
	Messages(ctx context.Context, state string, after string, limit int) (Page, error)
	// Message returns the message ref names, with its headers and payload;
	// an error wrapping ErrNotFound when there is none.
	Message(ctx context.Context, ref string) (Message, error)
}

// DeadActions is implemented by a Source whose dead letters can be
// requeued (made ready again) and purged (removed for good).
type DeadActions interface {
	RequeueDead(ctx context.Context, ref string) error
	PurgeDead(ctx context.Context, ref string) error
}

// KeySource is implemented by a sorted queue's Source: its keys with
// values waiting to be pulled, in key order, paged like Messages.
type KeySource interface {
	Keys(ctx context.Context, after string, limit int) (KeyPage, error)
}

// States are the message states a Source lists.
var States = []string{"ready", "in-flight", "delayed", "dead"}

// The errors a Source returns, wrapped, for the API to answer 404, 400
// and 409.
var (
	// ErrNotFound is returned when a message or key does not exist.
	ErrNotFound = errors.New("dashboard: not found")
	// ErrInvalid is returned for an unknown state, page position or
	// message reference.
	ErrInvalid = errors.New("dashboard: invalid request")
	// ErrRefused is returned when an action cannot be done to what it
	// names as it is: a dead letter whose payload cannot be read is not
	// requeued.
	ErrRefused = errors.New("dashboard: action refused")
)

// Stats is a queue's figures, as the API returns them.
type Stats struct {
	Kind     string `json:"kind"`      // "queue", "sorted", or the backend's name
	Ready    int64  `json:"ready"`     // deliverable now (sorted: values pending)
	InFlight int64  `json:"in_flight"` // leased (sorted: values in leased batches)
	Delayed  int64  `json:"delayed"`   // waiting for their time
	Dead     int64  `json:"dead"`      // in the dead-letter set
	Keys     int64  `json:"keys"`      // sorted: keys that can be pulled now or when due

	Enqueued     uint64 `json:"enqueued"` // lifetime totals (sorted: published, pulled, batches acked)
	Delivered    uint64 `json:"delivered"`
	Acked        uint64 `json:"acked"`
	Nacked       uint64 `json:"nacked"`
	Expired      uint64 `json:"expired"`
	DeadLettered uint64 `json:"dead_lettered"`

	OldestAgeSeconds float64 `json:"oldest_age_seconds"` // age of the oldest live message (sorted: pending or leased value) by the queue's clock; 0 when none
	LogBytes         int64   `json:"log_bytes"`          // bytes on disk
	LiveBytes        int64   `json:"live_bytes"`         // bytes the live messages need

	BackgroundError   string    `json:"background_error,omitempty"` // last failure of background work, while it lasts
	BackgroundErrorAt time.Time `json:"background_error_at"`        // of the last failure; zero when none since Open
	BackgroundErrors  uint64    `json:"background_errors"`          // failures since the queue was opened

	// CountsError is set when the queue's log is poisoned and could not
	// be read back (queue.Stats.CountsErr): the counts, totals and age
	// above are then the calls', an enqueue whose write failed included,
	// not what the log holds. It names the damage or the read error.
	CountsError string `json:"counts_error,omitempty"`
	// CountsCorrupt is set with CountsError when that error is damage
	// (it wraps queue.ErrCorrupt or wal.ErrCorrupt), not another read
	// error such as the disk's.
	CountsCorrupt bool `json:"counts_corrupt,omitempty"`
	// OldestError is set when the record of the oldest never-delivered
	// message could not be read (queue.Stats.OldestErr):
	// oldest_age_seconds above then leaves that message out, and is 0
	// when no other message is live. It names the damage or the read
	// error.
	OldestError string `json:"oldest_error,omitempty"`
	// OldestCorrupt is set with OldestError when that error is damage
	// (it wraps queue.ErrCorrupt or wal.ErrCorrupt): the stored record is
	// corrupt, rather than unread for another reason such as the disk's.
	OldestCorrupt bool `json:"oldest_corrupt,omitempty"`
}

// Page is one page of messages.
type Page struct {
	Messages []Message `json:"messages"`
	Next     string    `json:"next,omitempty"` // position of the next page; "" when none
}

// Message is one message. Payload is filled by Source.Message only.
type Message struct {
	Ref        string            `json:"ref"` // names it in Message, RequeueDead and PurgeDead; a dead letter's carries its id (or publish time)
	ID         string            `json:"id"`
	State      string            `json:"state"`
	EnqueuedAt time.Time         `json:"enqueued_at"`
	Due        time.Time         `json:"due"` // delayed: ready at; in flight: lease deadline; zero otherwise
	Deliveries int               `json:"deliveries"`
	Reason     string            `json:"reason,omitempty"` // dead: why
	Size       int               `json:"size"`             // bytes it takes in the queue's storage
	Headers    map[string]string `json:"headers,omitempty"`
	Payload    []byte            `json:"-"`
	// The base64 twins of ID, Reason and Headers, set only in what the
	// API sends, for the fields that are not valid UTF-8 (see Exact); a
	// Source leaves them empty.
	IDBase64      string            `json:"id_base64,omitempty"`
	ReasonBase64  string            `json:"reason_base64,omitempty"`
	HeadersBase64 map[string]string `json:"headers_base64,omitempty"` // name and value both in base64
}

// KeyPage is one page of a sorted queue's keys.
type KeyPage struct {
	Keys []Key `json:"keys"`
	// Next is the position of the next page, "" when there is none: for
	// ForSorted, the last key listed, or, for a key that is empty, is not
	// UTF-8 or starts with "~", "~" and the key's bytes in hex.
	Next string `json:"next,omitempty"`
}

// Key is one key of a sorted queue with values waiting.
type Key struct {
	Key    string    `json:"key"`
	Values int       `json:"values"` // values pending
	First  string    `json:"first"`  // smallest pending sort key, formatted
	Oldest time.Time `json:"oldest"` // publish time of its oldest pending value
	// KeyBase64 is the base64 twin of Key, set only in what the API
	// sends, for a key that is not valid UTF-8 (see Exact); a KeySource
	// leaves it empty.
	KeyBase64 string `json:"key_base64,omitempty"`
}
