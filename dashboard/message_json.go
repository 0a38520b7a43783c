package dashboard

import (
	"fmt"

	"github.com/walq/walq/internal/twin"
)

// JSON strings hold Unicode text: encoding/json writes each byte of a
// string that is not valid UTF-8 as U+FFFD, so the bytes a client read
// would not be the bytes stored. The API therefore sends an id, reason or
// header that is not valid UTF-8 in a twin field named with "_base64"
// (standard encoding, with padding): id_base64 and reason_base64 with id
// and reason empty, headers_base64 (name and value both in base64) with
// that header left out of headers; and a sorted queue's key in key_base64
// (api/keys), with key empty. These are the names and the rules of
// walq's --json output.

// keyWithTwin returns k as the API sends it: a key that is not valid
// UTF-8 moved to its base64 twin.
func keyWithTwin(k Key) Key {
	k.Key, k.KeyBase64 = twin.Split(k.Key)
	return k
}

// Exact returns k, as decoded from the API, with a key sent in its
// base64 twin back in Key with its exact bytes, and the twin empty.
func (k Key) Exact() (Key, error) {
	var err error
	if k.Key, err = twin.Join(k.Key, k.KeyBase64); err != nil {
		return k, fmt.Errorf("dashboard: key_base64: %w", err)
	}
	k.KeyBase64 = ""
	return k, nil
}

// withTwins returns m as the API sends it: each field that is not valid
// UTF-8 moved to its base64 twin.
func withTwins(m Message) Message {
	m.ID, m.IDBase64 = twin.Split(m.ID)
	m.Reason, m.ReasonBase64 = twin.Split(m.Reason)
	m.Headers, m.HeadersBase64 = twin.SplitHeaders(m.Headers)
	return m
}

// Exact returns m, as decoded from the API, with the fields that were
// sent in base64 twins back in ID, Reason and Headers with their exact
// bytes, and the twins empty. A Message that has no twin set is returned
// as it is.
func (m Message) Exact() (Message, error) {
	var err error
	if m.ID, err = twin.Join(m.ID, m.IDBase64); err != nil {
		return m, fmt.Errorf("dashboard: id_base64: %w", err)
	}
	if m.Reason, err = twin.Join(m.Reason, m.ReasonBase64); err != nil {
		return m, fmt.Errorf("dashboard: reason_base64: %w", err)
	}
	if m.Headers, err = twin.JoinHeaders(m.Headers, m.HeadersBase64); err != nil {
		return m, fmt.Errorf("dashboard: headers_base64: %w", err)
	}
	m.IDBase64, m.ReasonBase64, m.HeadersBase64 = "", "", nil
	return m, nil
}
