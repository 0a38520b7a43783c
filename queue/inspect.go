package queue

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/walq/walq/recovery"
	"github.com/walq/walq/wal"
)

// Record is one log record, as ReadLog shows it.
type Record struct {
	LSN        uint64            // the record's log sequence number
	Op         string            // enqueue, lease, ack, nack, extend, expire, dead, requeue-dead, purge, move, close; sorted and windowed queues: publish, pull, batch-ack, batch-return, batch-extend, batch-dead, value-revive, value-purge, value-dead; both: advance, drop, move-dead
	Seq        uint64            // the message or sorted value it concerns (its own LSN for an enqueue or a publish)
	Lease      uint64            // the lease or sorted batch it concerns (its own LSN for a lease or a pull)
	ID         string            // message id, where the record carries it
	ProducerID bool              // the id was given by the producer
	At         time.Time         // when it happened
	Due        time.Time         // deliver-at or lease deadline; zero when none
	Size       int               // encoded bytes of the record
	Reason     string            // dead-letter reason
	Headers    map[string]string // message headers (enqueue, move)
	Payload    []byte            // message payload (enqueue, move, publish)
	Key        string            // sorted queues: the message key (publish, pull)
	Sort       any               // publish: the sort key as int64, uint64, float64, string or time.Time; []byte when the directory does not record its type
	Values     []uint64          // batch-ack, batch-dead: the Seqs of the batch's values, ascending; none in older logs
}

// ReadLog calls fn for every record of the queue log in dir from LSN from
// on, in order, without creating or changing anything. It takes the
// directory lock shared when it can, until it returns, fn's calls
// included: an Open for writing meanwhile fails with ErrLocked. While a
// queue has the directory open it reads the log as that queue has written
// it so far. It reads through
// the real file system: it takes no Options, and so no Options.FS (the
// segment files are on the real disk whatever the FS, as tidwall/wal
// writes them with package os). Verify and Repair take an FS; to read a
// queue's messages through one, open it with ReadOnly and that FS. A
// failure to release the directory's lock at the end is joined with
// whatever it returns.
func ReadLog(dir string, from uint64, fn func(Record) error) error {
	return readLog(dir, from, fn, unlockDir)
}

// readLog is ReadLog, releasing the directory's lock with release
// (unlockDir; a white-box test's seam where it fails).
func readLog(dir string, from uint64, fn func(Record) error, release func(*dirLock) error) (err error) {
	lock, err := lockShared(dir)
	if err != nil && !errors.Is(err, ErrLocked) {
		return err
	}
	defer func() { err = errors.Join(err, release(lock)) }() // a lock still held keeps a writer out
	log, err := openReadOnly(dir)
	if err != nil {
		return err
	}
	defer log.Close()
	id, _ := ReadIdentity(dir) // the sort key type, when recorded
	_, err = recovery.Replay(log, max(from, log.FirstLSN()), func(lsn uint64, b []byte) error {
		var r record
		if err := decodeRecord(b, &r); err != nil {
			return err
		}
		return fn(publicRecord(lsn, &r, len(b), id))
	})
	if err != nil {
		return wrapCorrupt("read log", err)
	}
	return nil
}

func openReadOnly(dir string) (*wal.Log, error) {
	logPath := filepath.Join(dir, logDir)
	if _, err := os.Stat(logPath); err != nil {
		return nil, fmt.Errorf("queue: %s is not a queue directory: %w", dir, err)
	}
	log, err := wal.Open(logPath, &wal.Options{ReadOnly: true})
	if err != nil {
		return nil, wrapCorrupt("open log", err)
	}
	return log, nil
}

func publicRecord(lsn uint64, r *record, size int, id Identity) Record {
	p := Record{LSN: lsn, Op: opName(r.Op), Seq: r.Seq, Lease: r.Lease, ID: r.ID,
		ProducerID: r.Flags&flagProducerID != 0, At: unixTime(r.At), Due: unixTime(r.Due),
		Size: size, Reason: r.Reason, Headers: r.Headers, Payload: r.Payload, Key: r.Key}
	if r.Sort != nil {
		p.Sort = id.decodeSortAny(r.Sort)
	}
	switch r.Op {
	case opEnqueue, opPublish:
		p.Seq = lsn
	case opLease, opPull:
		p.Lease = lsn
	case opAdvance:
		p.Due = time.Time{} // Due holds a byte total (pendingCount), not a time
	case opBatchAck, opBatchDead:
		p.Payload = nil                                   // the packed Seqs (record_seqs.go)
		p.Values, _ = decodeBatchSeqs(r.Payload, r.Lease) // decodeRecord checked the packing (checkKind)
	}
	return p
}

func unixTime(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}
