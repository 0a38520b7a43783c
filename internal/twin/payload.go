package twin

import (
	"unicode"
	"unicode/utf8"
)

// Encoding names how walq's --json output prints the payload b, in its
// payload_encoding field: "text" when b is valid UTF-8 made of printable
// characters and ordinary white space (\n, \t, \r), else "base64". The
// dashboard's api/message reports the whole payload's by the same rule,
// so that a preview of it is printed as the whole would be.
func Encoding(b []byte) string {
	if !utf8.Valid(b) {
		return "base64"
	}
	for _, r := range string(b) {
		if !unicode.IsPrint(r) && r != '\n' && r != '\t' && r != '\r' {
			return "base64"
		}
	}
	return "text"
}
