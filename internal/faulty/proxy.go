package faulty

import (
	"bytes"
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// Proxy is a TCP proxy on loopback in front of one server (a nats-server),
// which can drop every connection at once (DropAll), refuse new ones
// (SetRefusing), stall every connection (SetStalled, StallAt), or cut a
// connection right after forwarding a client write
// that contains a pattern — before the server's answer can come back, the way
// a publish whose acknowledgement is lost looks to the client (CutAfter).
// It can also be a far link: each direction delays what it forwards
// (SetDelay: a round trip of both delays, in order, as a WAN adds latency),
// and stalls (Stall: everything held, nothing lost, until Resume — a link
// that stops answering without closing).
type Proxy struct {
	ln     net.Listener
	target string

	mu       sync.Mutex
	conns    map[net.Conn]net.Conn // client → server
	refusing bool
	stallPat []byte // StallAt
	cutPat   []byte
	cutLeft  int
	cuts     int
	drops    int
	closed   bool
	delay    [2]time.Duration // [toServer, toClient]
	stalled  [2]bool
	resumed  chan struct{} // closed and replaced by Resume
}

// Directions of a Proxy's traffic.
const (
	toServer = 0 // what clients send
	toClient = 1 // what the server answers
)

// NewProxy listens on 127.0.0.1 (a free port) and forwards to target
// ("host:port").
func NewProxy(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]net.Conn{}, resumed: make(chan struct{})}
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
		go p.pipe(c, s, true)
		go p.pipe(s, c, false)
	}
}

// chunk is what one read forwards: its bytes, when it was read, and whether
// the connection is cut once it is written (CutAfter).
type chunk struct {
	b   []byte
	at  time.Time
	cut bool
}

// pipe copies from src to dst through a queue, so that the direction's
// delay and stalls hold what was read without slowing the reading (up to
// the queue's bound); fromClient writes are checked for the cut pattern.
func (p *Proxy) pipe(src, dst net.Conn, fromClient bool) {
	dir := toClient
	if fromClient {
		dir = toServer
	}
	q := make(chan chunk, 256)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for c := range q {
			if !p.hold(dir, c.at) {
				return
			}
			if _, err := dst.Write(c.b); err != nil {
				return
			}
			if c.cut {
				p.closePair(src)
				return
			}
		}
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			c := chunk{b: bytes.Clone(buf[:n]), at: time.Now()}
			if fromClient {
				p.stallAt(c.b)
			}
			c.cut = fromClient && p.shouldCut(c.b)
			select {
			case q <- c:
			case <-done:
				err = io.ErrClosedPipe
			}
			if c.cut {
				break
			}
		}
		if err != nil {
			break
		}
	}
	close(q)
	<-done
	if fromClient {
		p.closePair(src)
	} else {
		p.closePair(dst)
	}
}

// hold waits until what direction dir read at at may be written: its delay
// past at, and no stall. It returns false once the proxy is closed.
func (p *Proxy) hold(dir int, at time.Time) bool {
	for {
		p.mu.Lock()
		closed, stalled, resumed, d := p.closed, p.stalled[dir], p.resumed, p.delay[dir]
		p.mu.Unlock()
		switch {
		case closed:
			return false
		case stalled:
			<-resumed
			continue
		}
		if wait := time.Until(at.Add(d)); wait > 0 {
			t := time.NewTimer(min(wait, 50*time.Millisecond)) // look at a stall or a new delay now and then
			select {
			case <-t.C:
			case <-resumed:
				t.Stop()
			}
			continue
		}
		return true
	}
}

// SetDelay makes each direction forward what it reads that long after
// reading it (toServer: what clients send; toClient: what the server
// answers), in order: a request's round trip grows by both.
func (p *Proxy) SetDelay(toServerDelay, toClientDelay time.Duration) {
	p.mu.Lock()
	p.delay = [2]time.Duration{toServerDelay, toClientDelay}
	p.mu.Unlock()
}

// Stall holds, from now on, everything the chosen directions read, until
// Resume: the connections stay open, nothing is lost, nothing arrives.
func (p *Proxy) Stall(toServerDir, toClientDir bool) {
	p.mu.Lock()
	p.stalled = [2]bool{toServerDir, toClientDir}
	p.mu.Unlock()
}

// Resume forwards again what a Stall held, in order (each chunk after its
// delay).
func (p *Proxy) Resume() {
	p.mu.Lock()
	p.stalled = [2]bool{}
	close(p.resumed)
	p.resumed = make(chan struct{})
	p.mu.Unlock()
}

// SetStalled makes the proxy hold every byte in both directions, on the
// connections open and on those it accepts meanwhile (a network cut that
// drops packets without resetting connections: to the client, a server that
// never answers), or forward them again, what it held first: Stall of both
// directions, and Resume.
func (p *Proxy) SetStalled(on bool) {
	if on {
		p.Stall(true, true)
	} else {
		p.Resume()
	}
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
	hit := len(p.stallPat) > 0 && bytes.Contains(b, p.stallPat)
	if hit {
		p.stallPat = nil
	}
	p.mu.Unlock()
	if hit {
		p.Stall(true, true)
	}
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
	close(p.resumed) // wake what a stall or a delay holds: it sees the proxy closed
	p.resumed = make(chan struct{})
	p.mu.Unlock()
	err := p.ln.Close()
	p.DropAll()
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

var _ io.Closer = (*Proxy)(nil)
