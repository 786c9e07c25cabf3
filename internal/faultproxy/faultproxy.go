// Package faultproxy is a TCP proxy for tests that puts a network fault
// between a client and its server: it forwards the connections made to
// its loopback port to a target, and can be told to black-hole them,
// delay them, reset them or refuse them, and then to heal.
//
// A store's tests open the store on Addr instead of the server's address:
//
//	p := faultproxy.Start(t, "127.0.0.1:5432")
//	db := open("postgres://loom@" + p.Addr() + "/loom")
//	p.Blackhole() // nothing passes; the store's deadline must end its calls
//	…
//	p.Heal()
//
// A black hole holds what is sent, as a partitioned network does: TCP
// loses no bytes, so what was sent during it arrives after Heal, if the
// connection is still open then. Reset and Down end connections with a
// TCP reset, as a server that crashed or a firewall that rejects does.
package faultproxy

import (
	"errors"
	"io"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Proxy forwards TCP connections to a target, with the faults it is told
// to make. Its methods are safe for concurrent use.
type Proxy struct {
	target string
	l      net.Listener

	mu      sync.Mutex
	blocked bool          // a black hole
	delay   time.Duration // of each chunk
	down    bool
	changed chan struct{} // closed and replaced when blocked or delay change
	links   map[*link]struct{}

	held atomic.Int64 // chunks read and not yet forwarded
	wg   sync.WaitGroup
}

// link is a client's connection and the proxy's to the target.
type link struct {
	client net.Conn
	once   sync.Once

	mu     sync.Mutex
	server net.Conn // nil until dialed
}

// Start starts a proxy on a free loopback port that forwards to target
// (host:port); the test's cleanup closes it.
func Start(t testing.TB, target string) *Proxy {
	t.Helper()
	p, err := New(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// New starts a proxy on a free loopback port that forwards to target;
// Close stops it.
func New(target string) (*Proxy, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{target: target, l: l, changed: make(chan struct{}), links: map[*link]struct{}{}}
	p.wg.Go(p.accept)
	return p, nil
}

// Addr is the proxy's address, host:port, to connect to instead of the
// target's.
func (p *Proxy) Addr() string { return p.l.Addr().String() }

// Port is the proxy's port.
func (p *Proxy) Port() int { return p.l.Addr().(*net.TCPAddr).Port }

// Blackhole stops every byte in both directions, of the connections open
// and of new ones (which are accepted and never answered), until Heal:
// the server seems to hang, as behind a partition or a firewall that
// drops packets.
func (p *Proxy) Blackhole() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.blocked = true
	p.change()
}

// change wakes the pumps that wait, to look at the faults again; p.mu is
// held.
func (p *Proxy) change() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// Held returns how many chunks of bytes the proxy read and holds (black
// hole) or delays: while it is above 0, something sent is in flight.
func (p *Proxy) Held() int { return int(p.held.Load()) }

// Delay makes every chunk of bytes wait d before it is forwarded, in
// order; 0 forwards at once.
func (p *Proxy) Delay(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.delay = d
	p.change()
}

// Reset ends every open connection with a TCP reset, as a crashed server
// or a restarted router does; new connections are forwarded.
func (p *Proxy) Reset() {
	p.mu.Lock()
	links := make([]*link, 0, len(p.links))
	for l := range p.links {
		links = append(links, l)
	}
	p.mu.Unlock()
	for _, l := range links {
		l.reset()
	}
}

// Down resets every open connection and every new one until Heal, as a
// server that is down (its port refuses) does.
func (p *Proxy) Down() {
	p.mu.Lock()
	p.down = true
	p.mu.Unlock()
	p.Reset()
}

// Heal ends every fault: bytes flow again, held ones first, without delay,
// and new connections are forwarded.
func (p *Proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down, p.delay, p.blocked = false, 0, false
	p.change()
}

// Close stops the proxy and closes every connection.
func (p *Proxy) Close() {
	p.l.Close()
	p.Heal()
	p.Reset()
	p.wg.Wait()
}

func (p *Proxy) accept() {
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		down := p.down
		p.mu.Unlock()
		if down {
			resetConn(c)
			continue
		}
		p.wg.Go(func() { p.serve(c) })
	}
}

// serve connects c to the target, once bytes may flow, and pumps both
// ways until either side ends.
func (p *Proxy) serve(c net.Conn) {
	l := &link{client: c}
	if !p.add(l) {
		c.Close()
		return
	}
	defer p.remove(l)
	p.pass(time.Time{})
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		resetConn(c)
		return
	}
	l.mu.Lock()
	l.server = s
	l.mu.Unlock()
	var both sync.WaitGroup
	both.Go(func() { p.pump(l, s, c) })
	both.Go(func() { p.pump(l, c, s) })
	both.Wait()
}

func (p *Proxy) add(l *link) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.down {
		return false
	}
	p.links[l] = struct{}{}
	return true
}

func (p *Proxy) remove(l *link) {
	p.mu.Lock()
	delete(p.links, l)
	p.mu.Unlock()
	l.close()
}

// pass returns once a chunk read at read may be forwarded: not during a
// black hole, nor before its delay is over (the zero time: no delay).
func (p *Proxy) pass(read time.Time) {
	for {
		p.mu.Lock()
		blocked, delay, changed := p.blocked, p.delay, p.changed
		p.mu.Unlock()
		if blocked {
			<-changed
			continue
		}
		left := time.Until(read.Add(delay))
		if read.IsZero() || left <= 0 {
			return
		}
		t := time.NewTimer(left)
		select {
		case <-t.C:
		case <-changed:
			t.Stop()
		}
	}
}

// pump copies from src to dst, holding each chunk while the proxy is
// black-holed and delaying it as told; when either side ends, the link
// ends.
func (p *Proxy) pump(l *link, dst, src net.Conn) {
	defer l.close()
	buf := make([]byte, 32<<10)
	for {
		// The pump reads in a black hole too, and holds what it read: a
		// pump that waited before its read would leave an open
		// connection's bytes unread or held depending on where the fault
		// found it, and Held could not say that something is in flight.
		n, err := src.Read(buf)
		if n > 0 {
			p.held.Add(1)
			p.pass(time.Now())
			p.held.Add(-1)
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				l.reset()
			}
			return
		}
	}
}

func (l *link) close() {
	l.once.Do(func() {
		l.client.Close()
		if s := l.dialed(); s != nil {
			s.Close()
		}
	})
}

func (l *link) reset() {
	resetConn(l.client)
	if s := l.dialed(); s != nil {
		resetConn(s)
	}
	l.close()
}

func (l *link) dialed() net.Conn {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.server
}

// resetConn closes c with a TCP reset (SO_LINGER 0) instead of a FIN.
func resetConn(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	c.Close()
}

// StartStore starts a Proxy in front of the store at storeURL (a
// postgres:// or redis:// URL) and returns it with the URL that reaches
// the store through it, its connect_timeout and timeout set to deadline:
// the setup of every outage test.
func StartStore(t testing.TB, storeURL string, deadline time.Duration) (*Proxy, string) {
	t.Helper()
	u, err := url.Parse(storeURL)
	if err != nil {
		t.Fatal(err)
	}
	p := Start(t, u.Host)
	u.Host = p.Addr()
	q := u.Query()
	q.Set("connect_timeout", deadline.String())
	q.Set("timeout", deadline.String())
	u.RawQuery = q.Encode()
	return p, u.String()
}
