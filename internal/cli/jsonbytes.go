package cli

import (
	"encoding/base64"
	"unicode/utf8"
)

// JSON strings hold Unicode text: encoding/json writes each byte of a
// string that is not valid UTF-8 as U+FFFD, so the bytes printed would not
// be the bytes stored. Every --json output therefore prints an id, key,
// string sort key, reason or header that is not valid UTF-8 in a twin
// field named with "_base64" (standard encoding, with padding), and the
// text field is then empty or leaves that header out; payloads have their
// own payload_encoding.
const base64Note = `An id, key, string sort key, reason, or header name or value that is
not valid UTF-8 is printed in base64 instead (standard, padded), in
id_base64, key_base64, sort_base64, reason_base64 or headers_base64 (name
and value both in base64), so no byte is lost.`

// textOrBase64 returns s as the text field when it is valid UTF-8, or else
// an empty text field and s in base64 for its "_base64" twin.
func textOrBase64(s string) (text, b64 string) {
	if utf8.ValidString(s) {
		return s, ""
	}
	return "", base64.StdEncoding.EncodeToString([]byte(s))
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

func put(m map[string]string, k, v string) map[string]string {
	if m == nil {
		m = make(map[string]string)
	}
	m[k] = v
	return m
}
