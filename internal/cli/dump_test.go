package cli

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walq/walq/queue"
)

// TestDumpLine checks what a dump line shows of a record: a batch
// settle's values, and the payload of every record that holds one,
// the salvage's dead copy included.
func TestDumpLine(t *testing.T) {
	for _, c := range []struct {
		name string
		r    queue.Record
		want string
	}{
		{"batch-ack", queue.Record{LSN: 9, Op: "batch-ack", Lease: 8, Key: "k", Size: 20, Values: []uint64{3, 5}},
			`{"lsn":9,"op":"batch-ack","lease":8,"key":"k","size":20,"values":[3,5]}`},
		{"batch-ack of an older log", queue.Record{LSN: 9, Op: "batch-ack", Lease: 8, Size: 20},
			`{"lsn":9,"op":"batch-ack","lease":8,"size":20}`},
		{"move-dead", queue.Record{LSN: 9, Op: "move-dead", Seq: 2, Size: 30, Reason: "poison", Payload: []byte("abc")},
			`{"lsn":9,"op":"move-dead","seq":2,"size":30,"reason":"poison","payload_bytes":3,"payload":"abc","payload_encoding":"text"}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, err := json.Marshal(toDump(c.r, true))
			require.NoError(t, err)
			require.JSONEq(t, c.want, string(b))
		})
	}
}
