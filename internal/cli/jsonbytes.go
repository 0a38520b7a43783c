package cli

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
