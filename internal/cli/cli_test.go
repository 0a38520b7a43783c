package cli

import (
	"flag"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseArgs(t *testing.T) {
	tests := []struct {
		name string
		args []string
		pos  []string
		json bool
		n    int
	}{
		{"flags before", []string{"--json", "--n", "3", "DIR"}, []string{"DIR"}, true, 3},
		{"flags after", []string{"DIR", "--json", "X"}, []string{"DIR", "X"}, true, 0},
		{"single dash", []string{"-n=2", "DIR"}, []string{"DIR"}, false, 2},
		{"double dash ends flags", []string{"DIR", "--", "--json"}, []string{"DIR", "--json"}, false, 0},
		{"no args", nil, nil, false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := flag.NewFlagSet("x", flag.ContinueOnError)
			j := fs.Bool("json", false, "")
			n := fs.Int("n", 0, "")
			pos, err := parseArgs(fs, tt.args)
			require.NoError(t, err)
			require.Equal(t, tt.pos, pos)
			require.Equal(t, tt.json, *j)
			require.Equal(t, tt.n, *n)
		})
	}
}

func TestPayloadText(t *testing.T) {
	tests := []struct {
		name, in, out, enc string
	}{
		{"ascii", "hello", "hello", "text"},
		{"utf8 and newline", "héllo\nwörld\t!", "héllo\nwörld\t!", "text"},
		{"empty", "", "", "text"},
		{"invalid utf8", "\xff\xfe", "//4=", "base64"},
		{"control byte", "a\x00b", "YQBi", "base64"},
		{"escape", "\x1b[31m", "G1szMW0=", "base64"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, enc := payloadText([]byte(tt.in))
			require.Equal(t, tt.out, out)
			require.Equal(t, tt.enc, enc)
		})
	}
}

func TestCommandsDocumented(t *testing.T) {
	for _, c := range commands() {
		t.Run(c.name, func(t *testing.T) {
			require.NotEmpty(t, c.short)
			require.NotEmpty(t, c.long)
			require.NotEmpty(t, c.exits)
			if !c.hidden {
				require.NotEmpty(t, c.example, "every command's help shows an example")
			}
			for _, code := range c.exits {
				require.Contains(t, exitText, code)
			}
		})
	}
}
