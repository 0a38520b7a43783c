package queue_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
)

// TestBatchReceiptWithPullTime: a receipt carries its pull's time through
// its string form, and a form without it still parses (its time is not
// checked).
func TestBatchReceiptWithPullTime(t *testing.T) {
	for _, c := range []struct {
		in string
		ok bool
		r  queue.BatchReceipt
	}{
		{"b12.1764547200000000001", true, queue.BatchReceipt{Lease: 12, At: 1764547200000000001}},
		{"b12.-5", true, queue.BatchReceipt{Lease: 12, At: -5}},
		{"b12", true, queue.BatchReceipt{Lease: 12}},
		{"b12.", false, queue.BatchReceipt{}},
		{"b12.0", false, queue.BatchReceipt{}},
		{"b12.x", false, queue.BatchReceipt{}},
		{"b.5", false, queue.BatchReceipt{}},
		{"b0.5", false, queue.BatchReceipt{}},
	} {
		checkParsed(t, c.in, c.ok, c.r, queue.ParseBatchReceipt)
	}
}

// TestReceiptWithDeliveryTime: a receipt carries its delivery's time
// through its string form, and the form without it still parses.
func TestReceiptWithDeliveryTime(t *testing.T) {
	for _, c := range []struct {
		in string
		ok bool
		r  queue.Receipt
	}{
		{"7.9.1764547200000000001", true, queue.Receipt{Seq: 7, Lease: 9, At: 1764547200000000001}},
		{"7.9", true, queue.Receipt{Seq: 7, Lease: 9}},
		{"7.9.0", false, queue.Receipt{}},
		{"7.9.", false, queue.Receipt{}},
		{"7.9.x", false, queue.Receipt{}},
		{"7.9.1.2", false, queue.Receipt{}},
		{"0.9.5", false, queue.Receipt{}},
		{"7", false, queue.Receipt{}},
	} {
		checkParsed(t, c.in, c.ok, c.r, queue.ParseReceipt)
	}
}

// checkParsed checks that parse reads in as want, and writes it back as
// in, or refuses it with ErrInvalidOptions when !ok.
func checkParsed[R interface{ String() string }](t *testing.T, in string, ok bool, want R, parse func(string) (R, error)) {
	t.Run(in, func(t *testing.T) {
		r, err := parse(in)
		if !ok {
			require.ErrorIs(t, err, queue.ErrInvalidOptions)
			return
		}
		require.NoError(t, err)
		require.Equal(t, want, r)
		require.Equal(t, in, r.String())
	})
}
