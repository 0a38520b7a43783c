package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"time"
)

// Every payload the harness enqueues is
//
//	| producer (4B LE) | sequence (8B LE) | enqueue time (8B LE, ns since epoch below) | filler |
//
// where the filler is a slice of fillPattern chosen by producer and
// sequence, so that a payload delivered to the wrong message, or damaged,
// fails the byte comparison.
const (
	headerSize     = 20
	minPayloadSize = headerSize + 4
	maxPayloadSize = 32 << 10 // fillers come from fillPattern
)

// epoch is the zero of the enqueue times in payloads.
var epoch = time.Now()

// fillPattern is the source of payload fillers: fixed pseudo-random bytes.
var fillPattern = func() []byte {
	r := rand.New(rand.NewPCG(5, 7))
	b := make([]byte, 64<<10)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}()

// filler returns the n filler bytes of message (producer, seq).
func filler(producer int, seq uint64, n int) []byte {
	off := (uint64(producer)*7919 + seq*131) % uint64(len(fillPattern)-n)
	return fillPattern[off : off+uint64(n)]
}

// encodePayload fills buf (len ≥ minPayloadSize) with message (producer, seq).
func encodePayload(buf []byte, producer int, seq uint64) {
	binary.LittleEndian.PutUint32(buf[0:], uint32(producer))
	binary.LittleEndian.PutUint64(buf[4:], seq)
	binary.LittleEndian.PutUint64(buf[12:], uint64(time.Since(epoch)))
	copy(buf[headerSize:], filler(producer, seq, len(buf)-headerSize))
}

// decodePayload is encodePayload's mirror: it returns the message's identity
// and age, and ok=false when the bytes are not a message of this run.
func decodePayload(p []byte, size int) (producer int, seq uint64, age time.Duration, ok bool) {
	if len(p) != size || size < minPayloadSize {
		return 0, 0, 0, false
	}
	producer = int(binary.LittleEndian.Uint32(p[0:]))
	seq = binary.LittleEndian.Uint64(p[4:])
	age = time.Since(epoch) - time.Duration(binary.LittleEndian.Uint64(p[12:]))
	ok = bytes.Equal(p[headerSize:], filler(producer, seq, size-headerSize))
	return producer, seq, age, ok
}

// checker records which messages came out and finds what went wrong: a
// message that never came out (lost), came out twice (duplicate), came out
// with other bytes (corrupt), or came out before an older message of the
// same producer to the same consumer (order, checked only when the system
// promises FIFO). It is safe for concurrent use through views.
type checker struct {
	payload  int               // payload size every message has
	fifo     bool              // check per-producer order
	expected []int64           // messages each producer enqueued; set by expect
	seen     [][]atomic.Uint64 // bit per (producer, seq)
	dup      atomic.Int64
	corrupt  atomic.Int64
	order    atomic.Int64
	beyond   atomic.Int64 // well-formed messages no producer enqueued
}

func newChecker(producers, perProducer, payload int, fifo bool) *checker {
	c := &checker{payload: payload, fifo: fifo, seen: make([][]atomic.Uint64, producers)}
	for i := range c.seen {
		c.seen[i] = make([]atomic.Uint64, (perProducer+63)/64)
	}
	return c
}

// expect sets how many messages each producer enqueued successfully.
func (c *checker) expect(counts []int64) { c.expected = counts }

// view is one consumer's window on a checker; it is not safe for concurrent
// use.
type view struct {
	c    *checker
	last []int64 // last sequence this consumer saw per producer; -1 for none
}

func (c *checker) view() *view {
	v := &view{c: c, last: make([]int64, len(c.seen))}
	for i := range v.last {
		v.last[i] = -1
	}
	return v
}

// check records one delivered payload and returns its age.
func (v *view) check(p []byte) time.Duration {
	c := v.c
	producer, seq, age, ok := decodePayload(p, c.payload)
	if !ok || producer >= len(c.seen) {
		c.corrupt.Add(1)
		return 0
	}
	if seq >= uint64(len(c.seen[producer]))*64 {
		c.beyond.Add(1)
		return age
	}
	bit := uint64(1) << (seq % 64)
	if c.seen[producer][seq/64].Or(bit)&bit != 0 {
		c.dup.Add(1)
		return age
	}
	if c.fifo && int64(seq) < v.last[producer] {
		c.order.Add(1)
	}
	v.last[producer] = max(v.last[producer], int64(seq))
	return age
}

// lost counts the expected messages never seen, and the messages seen that
// their producer never reported as enqueued.
func (c *checker) lost() (lost, unexpected int64) {
	for p, words := range c.seen {
		var got int64
		for i := range words {
			for w := words[i].Load(); w != 0; w &= w - 1 {
				if int64(i*64+bits.TrailingZeros64(w)) < c.expected[p] {
					got++
				} else {
					unexpected++
				}
			}
		}
		lost += c.expected[p] - got
	}
	return lost, unexpected
}

// problems returns one line per kind of error found, empty when the run
// delivered exactly what was enqueued.
func (c *checker) problems() []string {
	lost, unexpected := c.lost()
	var out []string
	add := func(n int64, what string) {
		if n > 0 {
			out = append(out, fmt.Sprintf("%s %d", what, n))
		}
	}
	add(lost, "lost")
	add(unexpected+c.beyond.Load(), "unexpected")
	add(c.dup.Load(), "duplicate")
	add(c.corrupt.Load(), "corrupt")
	add(c.order.Load(), "out-of-order")
	return out
}

// joinProblems formats a row's errors for the table.
func joinProblems(p []string) string { return strings.Join(p, ", ") }
