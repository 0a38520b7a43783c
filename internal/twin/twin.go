// Package twin moves strings that are not valid UTF-8 into base64 "twin"
// fields of JSON output, and back.
//
// JSON strings hold Unicode text: encoding/json writes each byte of a
// string that is not valid UTF-8 as U+FFFD, so the bytes printed would not
// be the bytes stored. walq's --json output and the dashboard's API
// therefore send such a string in a twin field named with "_base64"
// (standard encoding, with padding) and leave the text field empty; a
// header whose name or value is not valid UTF-8 goes, name and value both
// in base64, to a headers_base64 map and is left out of headers.
//
// The functions are pure and safe for concurrent use.
package twin

import (
	"encoding/base64"
	"unicode/utf8"
)

// Split returns s as the text field when it is valid UTF-8, or else an
// empty text field and s in base64 for its twin.
func Split(s string) (text, b64 string) {
	if utf8.ValidString(s) {
		return s, ""
	}
	return "", base64.StdEncoding.EncodeToString([]byte(s))
}

// Join is Split reversed: the twin's bytes when it is set, else text.
func Join(text, b64 string) (string, error) {
	if b64 == "" {
		return text, nil
	}
	b, err := base64.StdEncoding.DecodeString(b64)
	return string(b), err
}

// SplitHeaders returns the headers whose name and value are valid UTF-8
// as they are, and the others with name and value in base64; each nil
// when it has no header.
func SplitHeaders(h map[string]string) (text, b64 map[string]string) {
	for k, v := range h {
		if utf8.ValidString(k) && utf8.ValidString(v) {
			text = put(text, k, v)
			continue
		}
		b64 = put(b64, base64.StdEncoding.EncodeToString([]byte(k)), base64.StdEncoding.EncodeToString([]byte(v)))
	}
	return text, b64
}

// JoinHeaders is SplitHeaders reversed; it does not change text.
func JoinHeaders(text, b64 map[string]string) (map[string]string, error) {
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
