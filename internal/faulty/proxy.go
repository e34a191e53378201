package faulty

import (
	"bytes"
	"errors"
	"io"
	"net"
	"sync"
)

// Proxy is a TCP proxy on loopback in front of one server (a nats-server),
// which can drop every connection at once (DropAll), refuse new ones
// (SetRefusing), stall every connection — old and new held open, no byte
// forwarded either way, as a network cut that drops packets looks to both
// ends (SetStalled) — or cut a connection right after forwarding a client
// write that contains a pattern — before the server's answer can come back,
// the way a publish whose acknowledgement is lost looks to the client
// (CutAfter).
type Proxy struct {
	ln     net.Listener
	target string

	mu       sync.Mutex
	moved    *sync.Cond            // on mu: a stall ended, or a connection closed
	conns    map[net.Conn]net.Conn // client → server
	refusing bool
	stalled  bool
	stallPat []byte // StallAt
	cutPat   []byte
	cutLeft  int
	cuts     int
	drops    int
	closed   bool
}

// NewProxy listens on 127.0.0.1 (a free port) and forwards to target
// ("host:port").
func NewProxy(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]net.Conn{}}
	p.moved = sync.NewCond(&p.mu)
	go p.accept()
	return p, nil
}

// Addr returns the proxy's address.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// URL returns nats://<Addr>.
func (p *Proxy) URL() string { return "nats://" + p.Addr() }

// SetTarget points new connections at another server address.
func (p *Proxy) SetTarget(target string) {
	p.mu.Lock()
	p.target = target
	p.mu.Unlock()
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		refusing, target := p.refusing, p.target
		p.mu.Unlock()
		if refusing {
			c.Close()
			continue
		}
		s, err := net.Dial("tcp", target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns[c] = s
		p.mu.Unlock()
		go p.pipe(c, s, c, true)
		go p.pipe(s, c, c, false)
	}
}

// pipe copies from src to dst (of the pair of client); fromClient writes are
// checked for the cut pattern.
func (p *Proxy) pipe(src, dst, client net.Conn, fromClient bool) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if fromClient {
				p.stallAt(buf[:n])
			}
			if !p.hold(client) {
				break
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				break
			}
			if fromClient && p.shouldCut(buf[:n]) {
				p.closePair(src)
				return
			}
		}
		if err != nil {
			break
		}
	}
	if fromClient {
		p.closePair(src)
	} else {
		p.closePair(dst)
	}
}

// hold waits while the proxy is stalled; false if client's pair was closed
// meanwhile.
func (p *Proxy) hold(client net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for {
		if _, open := p.conns[client]; !open {
			return false
		}
		if !p.stalled {
			return true
		}
		p.moved.Wait()
	}
}

// SetStalled makes the proxy hold every byte in both directions, on the
// connections open and on those it accepts meanwhile (a network cut that
// drops packets without resetting connections: to the client, a server that
// never answers), or forward them again, what it held first.
func (p *Proxy) SetStalled(on bool) {
	p.mu.Lock()
	p.stalled = on
	p.moved.Broadcast()
	p.mu.Unlock()
}

// StallAt arms the proxy to stall (SetStalled) at the next client write
// that contains pattern — that write held too: for NATS, a publish ("HPUB
// <subject>") to a server that from then on never answers, the connection
// open.
func (p *Proxy) StallAt(pattern []byte) {
	p.mu.Lock()
	p.stallPat = bytes.Clone(pattern)
	p.mu.Unlock()
}

func (p *Proxy) stallAt(b []byte) {
	p.mu.Lock()
	if len(p.stallPat) > 0 && bytes.Contains(b, p.stallPat) {
		p.stalled, p.stallPat = true, nil
	}
	p.mu.Unlock()
}

func (p *Proxy) shouldCut(b []byte) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cutLeft > 0 && len(p.cutPat) > 0 && bytes.Contains(b, p.cutPat) {
		p.cutLeft--
		p.cuts++
		return true
	}
	return false
}

// closePair closes a client connection and its server side.
func (p *Proxy) closePair(client net.Conn) {
	p.mu.Lock()
	s, ok := p.conns[client]
	delete(p.conns, client)
	p.moved.Broadcast()
	p.mu.Unlock()
	client.Close()
	if ok {
		s.Close()
	}
}

// DropAll closes every open connection (both sides), as a network failure
// would; clients reconnect through the proxy.
func (p *Proxy) DropAll() int {
	p.mu.Lock()
	conns := make([]net.Conn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.drops += len(conns)
	p.mu.Unlock()
	for _, c := range conns {
		p.closePair(c)
	}
	return len(conns)
}

// SetRefusing makes the proxy close new connections at once (a server that is
// down) or accept them again.
func (p *Proxy) SetRefusing(on bool) {
	p.mu.Lock()
	p.refusing = on
	p.mu.Unlock()
}

// CutAfter arms the proxy to cut the connection right after forwarding each of
// the next n client writes that contain pattern (for NATS, a publish: "PUB
// <subject>" or "HPUB <subject>"). The server receives the write whole; its
// answer is lost.
func (p *Proxy) CutAfter(pattern []byte, n int) {
	p.mu.Lock()
	p.cutPat, p.cutLeft = bytes.Clone(pattern), n
	p.mu.Unlock()
}

// Stats returns how many connections were cut after a matching write and how
// many were dropped by DropAll.
func (p *Proxy) Stats() (cuts, drops int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cuts, p.drops
}

// Close stops the proxy and closes every connection.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	err := p.ln.Close()
	p.DropAll()
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

var _ io.Closer = (*Proxy)(nil)
