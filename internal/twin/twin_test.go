package twin_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/internal/twin"
)

// TestSplitJoin: valid UTF-8 stays in the text field with no twin; other
// bytes move whole to the twin and come back exactly.
func TestSplitJoin(t *testing.T) {
	for _, s := range []string{"", "order/7", "ünï", "\xff\xfe/order", "a\x00b"} {
		text, b64 := twin.Split(s)
		if s == "\xff\xfe/order" {
			require.Equal(t, "", text)
			require.Equal(t, "//4vb3JkZXI=", b64)
		}
		back, err := twin.Join(text, b64)
		require.NoError(t, err)
		require.Equal(t, s, back)
	}
	_, err := twin.Join("", "not base64!")
	require.Error(t, err)
}

// TestSplitJoinHeaders: a header with an odd name or value moves to the
// twin map, both in base64, and the pair joins back to the original.
func TestSplitJoinHeaders(t *testing.T) {
	h := map[string]string{"ok": "v", "\xffname": "v", "name": "\xfe"}
	text, b64 := twin.SplitHeaders(h)
	require.Equal(t, map[string]string{"ok": "v"}, text)
	require.Equal(t, map[string]string{"/25hbWU=": "dg==", "bmFtZQ==": "/g=="}, b64)
	back, err := twin.JoinHeaders(text, b64)
	require.NoError(t, err)
	require.Equal(t, h, back)
	text, b64 = twin.SplitHeaders(nil)
	require.Nil(t, text)
	require.Nil(t, b64)
}

func TestEncoding(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"empty", "", "text"},
		{"text with white space", "a é\n\t\r", "text"},
		{"not UTF-8", "a\xff", "base64"},
		{"control character", "a\x00", "base64"},
		{"escape", "a\x1b[0m", "base64"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := twin.Encoding([]byte(tc.in)); got != tc.want {
				t.Errorf("Encoding(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}
