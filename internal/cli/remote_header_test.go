package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// A -H value given without its name is often a bare token: the error that
// refuses it must not print it.
func TestMalformedHeaderNotShown(t *testing.T) {
	const token = "tok3nS3cret"
	for _, h := range []string{"Bearer " + token, token, ": " + token} {
		var out, errOut bytes.Buffer
		e := &env{stdin: strings.NewReader(""), stdout: &out, stderr: &errOut}
		code := run(e, []string{"stats", "--url", "http://127.0.0.1:1/", "-H", h})
		shown := out.String() + errOut.String()
		assert.NotEqual(t, 0, code, shown)
		assert.Contains(t, shown, "Name: value", "the error says what a header must be")
		assert.NotContains(t, shown, token)
	}
}
