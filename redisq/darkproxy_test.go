package redisq_test

import (
	"bytes"
	"net"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// darkProxy forwards TCP connections to a server. goDark silences every
// connection made so far, both ways, without closing either socket: what
// either side sends is read and dropped, as by a host that vanished
// without a reset, a NAT or firewall that forgot the flow, or a VIP moved
// elsewhere. The connections accepted after that are forwarded again.
// While muted, it forwards what clients send and drops what the server
// answers, on every connection: a server whose replies come late; and
// it keeps what the clients sent meanwhile (heard).
type darkProxy struct {
	ln     net.Listener
	target string
	muted  atomic.Bool
	mu     sync.Mutex   // guards epoch, conns, said and closed
	epoch  int          // goDark's count; a connection of an earlier epoch is dark
	conns  []net.Conn   // every socket of the proxy, closed by stop
	said   bytes.Buffer // what clients sent while muted, on any connection (heard)
	closed bool
	wg     sync.WaitGroup // the accept loop and the copies
}

// startDarkProxy starts a proxy to target on a loopback port, stopped
// when the test ends.
func startDarkProxy(t *testing.T, target string) *darkProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &darkProxy{ln: ln, target: target}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.stop)
	return p
}

func (p *darkProxy) addr() string { return p.ln.Addr().String() }

func (p *darkProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			_, _ = c.Close(), s.Close()
			return
		}
		p.conns = append(p.conns, c, s)
		epoch := p.epoch
		p.wg.Add(2)
		p.mu.Unlock()
		go p.copy(s, c, epoch, nil)
		go p.copy(c, s, epoch, &p.muted)
	}
}

// copy forwards from src to dst while the connection's epoch is the
// current one and mute (nil: never) is unset; else it reads and drops.
func (p *darkProxy) copy(dst, src net.Conn, epoch int, mute *atomic.Bool) {
	defer p.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && mute == nil && p.muted.Load() {
			p.hear(buf[:n])
		}
		if n > 0 && !p.isDark(epoch) && (mute == nil || !mute.Load()) {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// hear keeps b, sent by a client while the proxy was muted.
func (p *darkProxy) hear(b []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.said.Write(b)
}

// heard returns what clients sent while the proxy was muted.
func (p *darkProxy) heard() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.said.String()
}

func (p *darkProxy) isDark(epoch int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return epoch < p.epoch
}

// goDark silences every connection made so far.
func (p *darkProxy) goDark() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.epoch++
}

// stop closes the listener and every socket, and waits for the copies.
func (p *darkProxy) stop() {
	_ = p.ln.Close()
	p.mu.Lock()
	p.closed = true
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
