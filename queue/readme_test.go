package queue_test

import (
	"bytes"
	"go/format"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
)

// goBlock matches a fenced Go block of a Markdown file.
var goBlock = regexp.MustCompile("(?ms)^```go\n(.*?)^```\n")

// The README's Go snippets are whole programs that compile as written
// against this module, gofmt'd: each is built in a scratch module that
// replaces github.com/walq/walq with this checkout.
func TestReadmeSnippetsCompile(t *testing.T) {
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	require.NoError(t, err)
	blocks := goBlock.FindAllSubmatch(readme, -1)
	require.GreaterOrEqual(t, len(blocks), 3, "README.md should hold the Use, streaming and sorted snippets")
	mod := scratchModule(t, root)
	for i, b := range blocks {
		src := b[1]
		formatted, err := format.Source(src)
		require.NoError(t, err, "snippet %d does not parse", i)
		require.Equal(t, string(formatted), string(src), "snippet %d is not gofmt'd", i)
		dir := filepath.Join(mod, "snippet"+string(rune('a'+i)))
		require.NoError(t, os.MkdirAll(dir, 0o700))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "main.go"), src, 0o600))
	}
	cmd := exec.Command(goTool(), "vet", "./...")
	cmd.Dir = mod
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go vet of the README's snippets:\n%s", out)
}

// scratchModule makes a module that requires this checkout's module
// through a replace directive, with its go.sum, and returns its directory.
func scratchModule(t *testing.T, root string) string {
	t.Helper()
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	require.NoError(t, err)
	goLine := regexp.MustCompile(`(?m)^go [0-9.]+$`).Find(gomod)
	require.NotNil(t, goLine)
	var b bytes.Buffer
	b.WriteString("module readme\n\n")
	b.Write(goLine)
	b.WriteString("\n\nrequire github.com/walq/walq v0.0.0\n\nreplace github.com/walq/walq => " + root + "\n")
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.mod"), b.Bytes(), 0o600))
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.sum"), sum, 0o600))
	return dir
}

// goTool returns the go command of the toolchain running the test.
func goTool() string {
	p := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(p); err == nil {
		return p
	}
	return "go" // from PATH
}
