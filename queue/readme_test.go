package queue_test

import (
	"bytes"
	"encoding/json"
	"go/format"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
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

// The README's dashboard program publishes the queue's metrics with expvar
// and says they need nothing more: run as written (its directory and
// address moved to scratch ones), it serves them at /debug/vars behind
// the same authentication as the dashboard.
func TestReadmeDashboardServesExpvar(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a program")
	}
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	require.NoError(t, err)
	var src string
	for _, b := range goBlock.FindAllSubmatch(readme, -1) {
		if bytes.Contains(b[1], []byte("expvar.Publish(")) {
			src = string(b[1])
		}
	}
	require.NotEmpty(t, src, "README.md should hold the dashboard program that publishes expvar")
	addr := freeAddr(t)
	src = strings.Replace(src, `"/var/lib/app/orders"`, strconv.Quote(t.TempDir()), 1)
	src = strings.Replace(src, `"localhost:8080"`, strconv.Quote(addr), 1)
	mod := scratchModule(t, root)
	require.NoError(t, os.WriteFile(filepath.Join(mod, "main.go"), []byte(src), 0o600))
	bin := filepath.Join(t.TempDir(), "dash")
	build := exec.Command(goTool(), "build", "-o", bin, ".")
	build.Dir = mod
	build.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "go build of the README's dashboard program:\n%s", out)

	prog := startProgram(t, bin)
	defer prog.stop()
	body := getWhenUp(t, prog, "http://"+addr+"/debug/vars", "admin", "secret")
	var vars map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(body, &vars))
	require.Contains(t, vars, "walq_orders")
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(vars["walq_orders"], &m))
	require.Contains(t, m, "Enqueued", "walq_orders is the queue's Metrics")
	resp, err := http.Get("http://" + addr + "/debug/vars")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "the metrics are behind the service's authentication")
}

// freeAddr returns a loopback address with a port that was free.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

// program is a program the test runs, with what it wrote to stdout and
// stderr.
type program struct {
	cmd     *exec.Cmd
	out     bytes.Buffer  // stdout and stderr; read once done is closed
	done    chan struct{} // closed once the program has exited
	waitErr error         // how it exited; set before done is closed
}

// startProgram runs bin.
func startProgram(t *testing.T, bin string) *program {
	t.Helper()
	p := &program{cmd: exec.Command(bin), done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.out
	require.NoError(t, p.cmd.Start())
	go func() {
		p.waitErr = p.cmd.Wait()
		close(p.done)
	}()
	return p
}

// stop kills the program, if it still runs, and waits for it to exit.
func (p *program) stop() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

// getWhenUp GETs url with basic auth once the program p listens, and
// returns the body of a 200 answer. It fails with the program's output
// when the program exits first, or does not listen within a minute.
func getWhenUp(t *testing.T, p *program, url, user, pass string) []byte {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	req.SetBasicAuth(user, pass)
	var resp *http.Response
	for i := 0; i < 600; i++ { // the program starts: up to a minute
		if resp, err = http.DefaultClient.Do(req); err == nil {
			break
		}
		select {
		case <-p.done:
			t.Fatalf("the program exited before it listened (%v); its output:\n%s", p.waitErr, p.out.String())
		case <-time.After(100 * time.Millisecond):
		}
	}
	if err != nil {
		p.stop()
		t.Fatalf("the program never listened (%v); its output:\n%s", err, p.out.String())
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "GET %s: %s", url, body)
	return body
}

// The README names the Go release each module needs as its go.mod says:
// the library's, and those of the modules of their own a user imports
// (the Redis backend, the Prometheus collector) or runs (the benchmarks).
func TestReadmeGoReleases(t *testing.T) {
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	require.NoError(t, err)
	text := strings.Join(strings.Fields(string(readme)), " ")
	for _, mod := range []string{"go.mod", "redisq/go.mod", "prom/go.mod", "bench/go.mod"} {
		gomod, err := os.ReadFile(filepath.Join(root, mod))
		require.NoError(t, err)
		line := regexp.MustCompile(`(?m)^go ([0-9.]+)$`).FindSubmatch(gomod)
		require.NotNil(t, line, mod)
		require.Contains(t, text, "`"+mod+"` says `go "+string(line[1])+"`", "README.md should give %s's Go release", mod)
	}
}

// The README's Use, streaming and sorted programs do what their prose
// says when run as written (their directories moved to scratch ones):
// each exits 0 and prints what it processed, and the ack queue programs
// leave every message they enqueued acked.
func TestReadmeSnippetsRun(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs programs")
	}
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	require.NoError(t, err)
	cases := []struct {
		name, marker string
		dirs         []string         // the directories the program opens
		out          *regexp.Regexp   // what it logs
		check        func(dir string) // what it leaves in its first directory
	}{
		{"use", `"resize photo 42"`, []string{"/var/lib/app/jobs"},
			regexp.MustCompile(`(?m)processing [0-9a-f-]+: resize photo 42$`), func(dir string) { requireAllAcked(t, dir, 1) }},
		{"streaming", "EnqueueAsync(", []string{"/var/lib/app/events"},
			regexp.MustCompile(`^$`), func(dir string) { requireAllAcked(t, dir, 3) }},
		{"sorted", "OpenWindowed(", []string{"/var/lib/app/sorted", "/var/lib/app/windowed"},
			regexp.MustCompile(`(?s)customer-42: 1 values\n.*customer-42: 1 values\n$`), nil},
	}
	srcs := map[string]string{}
	dirs := map[string][]string{}
	for _, c := range cases {
		src := readmeProgram(t, readme, c.marker)
		for _, d := range c.dirs {
			dirs[c.name] = append(dirs[c.name], t.TempDir())
			src = strings.Replace(src, strconv.Quote(d), strconv.Quote(dirs[c.name][len(dirs[c.name])-1]), 1)
		}
		srcs[c.name] = src
	}
	bins := buildPrograms(t, root, srcs)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			prog := startProgram(t, bins[c.name])
			select {
			case <-prog.done:
			case <-time.After(time.Minute):
				prog.stop()
				t.Fatalf("the program did not end within a minute; its output:\n%s", prog.out.String())
			}
			require.NoError(t, prog.waitErr, "its output:\n%s", prog.out.String())
			require.Regexp(t, c.out, prog.out.String())
			if c.check != nil {
				c.check(dirs[c.name][0])
			}
		})
	}
}

// readmeProgram returns the README's Go block that holds marker.
func readmeProgram(t *testing.T, readme []byte, marker string) string {
	t.Helper()
	for _, b := range goBlock.FindAllSubmatch(readme, -1) {
		if bytes.Contains(b[1], []byte(marker)) {
			return string(b[1])
		}
	}
	t.Fatalf("README.md has no Go program holding %s", marker)
	return ""
}

// buildPrograms builds each program of srcs (source by name) against this
// checkout, all in one go build, and returns their binaries by name.
func buildPrograms(t *testing.T, root string, srcs map[string]string) map[string]string {
	t.Helper()
	mod := scratchModule(t, root)
	for name, src := range srcs {
		require.NoError(t, os.MkdirAll(filepath.Join(mod, name), 0o700))
		require.NoError(t, os.WriteFile(filepath.Join(mod, name, "main.go"), []byte(src), 0o600))
	}
	out := t.TempDir()
	build := exec.Command(goTool(), "build", "-o", out+string(filepath.Separator), "./...")
	build.Dir = mod
	build.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	msg, err := build.CombinedOutput()
	require.NoError(t, err, "go build of the README's programs:\n%s", msg)
	bins := map[string]string{}
	for name := range srcs {
		bins[name] = filepath.Join(out, name)
		if runtime.GOOS == "windows" {
			bins[name] += ".exe"
		}
	}
	return bins
}

// requireAllAcked opens the queue at dir and checks that n messages were
// enqueued and acked and that none is left.
func requireAllAcked(t *testing.T, dir string, n int) {
	t.Helper()
	q, err := queue.Open(dir, nil)
	require.NoError(t, err)
	defer q.Close()
	s := q.Stats()
	require.Zero(t, s.Ready+s.InFlight+s.Delayed+s.Dead, "%+v", s)
	m := q.Metrics()
	require.Equal(t, uint64(n), m.Enqueued)
	require.Equal(t, uint64(n), m.Acked)
}
