package dashboard

import (
	"encoding/base64"
	"fmt"
	"unicode/utf8"
)

// JSON strings hold Unicode text: encoding/json writes each byte of a
// string that is not valid UTF-8 as U+FFFD, so the bytes a client read
// would not be the bytes stored. The API therefore sends an id, reason or
// header that is not valid UTF-8 in a twin field named with "_base64"
// (standard encoding, with padding): id_base64 and reason_base64 with id
// and reason empty, headers_base64 (name and value both in base64) with
// that header left out of headers. These are the names and the rules of
// walq's --json output.

// withTwins returns m as the API sends it: each field that is not valid
// UTF-8 moved to its base64 twin.
func withTwins(m Message) Message {
	m.ID, m.IDBase64 = textOrBase64(m.ID)
	m.Reason, m.ReasonBase64 = textOrBase64(m.Reason)
	m.Headers, m.HeadersBase64 = splitHeaders(m.Headers)
	return m
}

// Exact returns m, as decoded from the API, with the fields that were
// sent in base64 twins back in ID, Reason and Headers with their exact
// bytes, and the twins empty. A Message that has no twin set is returned
// as it is.
func (m Message) Exact() (Message, error) {
	var err error
	if m.ID, err = fromBase64(m.ID, m.IDBase64); err != nil {
		return m, fmt.Errorf("dashboard: id_base64: %w", err)
	}
	if m.Reason, err = fromBase64(m.Reason, m.ReasonBase64); err != nil {
		return m, fmt.Errorf("dashboard: reason_base64: %w", err)
	}
	if m.Headers, err = joinHeaders(m.Headers, m.HeadersBase64); err != nil {
		return m, fmt.Errorf("dashboard: headers_base64: %w", err)
	}
	m.IDBase64, m.ReasonBase64, m.HeadersBase64 = "", "", nil
	return m, nil
}

// textOrBase64 returns s as the text field when it is valid UTF-8, or
// else an empty text field and s in base64 for its twin.
func textOrBase64(s string) (text, b64 string) {
	if utf8.ValidString(s) {
		return s, ""
	}
	return "", base64.StdEncoding.EncodeToString([]byte(s))
}

// fromBase64 is textOrBase64 reversed: the twin's bytes when it is set.
func fromBase64(text, b64 string) (string, error) {
	if b64 == "" {
		return text, nil
	}
	b, err := base64.StdEncoding.DecodeString(b64)
	return string(b), err
}

// splitHeaders returns the headers whose name and value are valid UTF-8
// as they are, and the others with name and value in base64; each nil
// when it has no header.
func splitHeaders(h map[string]string) (text, b64 map[string]string) {
	for k, v := range h {
		if utf8.ValidString(k) && utf8.ValidString(v) {
			text = put(text, k, v)
			continue
		}
		b64 = put(b64, base64.StdEncoding.EncodeToString([]byte(k)), base64.StdEncoding.EncodeToString([]byte(v)))
	}
	return text, b64
}

// joinHeaders is splitHeaders reversed; it does not change text.
func joinHeaders(text, b64 map[string]string) (map[string]string, error) {
	if len(b64) == 0 {
		return text, nil
	}
	out := make(map[string]string, len(text)+len(b64))
	for k, v := range text {
		out[k] = v
	}
	for k, v := range b64 {
		name, err := base64.StdEncoding.DecodeString(k)
		if err != nil {
			return nil, err
		}
		value, err := base64.StdEncoding.DecodeString(v)
		if err != nil {
			return nil, err
		}
		out = put(out, string(name), string(value))
	}
	return out, nil
}

func put(m map[string]string, k, v string) map[string]string {
	if m == nil {
		m = make(map[string]string)
	}
	m[k] = v
	return m
}
