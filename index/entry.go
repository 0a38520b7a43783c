package index

// State is where a message that has an Entry stands.
type State uint8

// The states of an Entry. These values are stored in snapshots and must not
// be changed.
const (
	Ready   State = 1 // may be delivered now
	Delayed State = 2 // may be delivered at Due
	Leased  State = 3 // delivered; owned by a consumer until Due
	Dead    State = 4 // in the dead-letter set
)

// String names the state.
func (s State) String() string {
	switch s {
	case Ready:
		return "ready"
	case Delayed:
		return "delayed"
	case Leased:
		return "leased"
	case Dead:
		return "dead"
	}
	return "unknown"
}

// Entry is the metadata of one message that the log cursor no longer
// accounts for.
type Entry struct {
	_msgpack struct{} `msgpack:",as_array"` // stored in snapshots as an array

	Seq         uint64 // LSN of the message's enqueue record: its identity
	Loc         uint64 // LSN of the record holding the payload: Seq until moved
	ID          string // message id, producer-given or generated
	Size        uint32 // bytes of the record at Loc
	EnqueuedAt  int64  // unix nanoseconds
	Deliveries  uint32 // times delivered so far
	State       State  // where it stands
	Due         int64  // Delayed: ready time; Leased: lease deadline (unix ns)
	Lease       uint64 // Leased: LSN of the lease record, the receipt
	DeliveredAt int64  // Leased: unix ns of the current delivery
	Reason      string // Dead: why
	// Undelivered marks a Ready entry never delivered: a message copied
	// forward from the cursor's region by a compaction. It is delivered
	// after every other Ready entry, in Seq order, as the cursor's messages
	// would have been. Put clears it for any other state, so it is false
	// once the message is leased, delayed or dead.
	Undelivered bool
}

// timeKey orders entries by a time, then by sequence.
type timeKey struct {
	at  int64  // unix nanoseconds
	seq uint64 // tie breaker
}

func lessTimeKey(a, b timeKey) bool {
	if a.at != b.at {
		return a.at < b.at
	}
	return a.seq < b.seq
}

// locKey orders entries by the LSN of their payload record, then by
// sequence.
type locKey struct {
	loc uint64 // Entry.Loc
	seq uint64 // tie breaker
}

func lessLocKey(a, b locKey) bool {
	if a.loc != b.loc {
		return a.loc < b.loc
	}
	return a.seq < b.seq
}

func lessEntry(a, b Entry) bool { return a.Seq < b.Seq }
