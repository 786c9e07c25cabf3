package faultproxy

import (
	"bufio"
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/loomthreads/loom/internal/testwait"
)

// echoServer answers every line with the same line.
func echoServer(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
	return l.Addr().String()
}

type client struct {
	c net.Conn
	r *bufio.Reader
}

func dial(t *testing.T, p *Proxy) *client {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &client{c, bufio.NewReader(c)}
}

// ask sends line and reads the answer, waiting at most wait.
func (c *client) ask(line string, wait time.Duration) (string, error) {
	c.c.SetDeadline(time.Now().Add(wait))
	if _, err := io.WriteString(c.c, line+"\n"); err != nil {
		return "", err
	}
	s, err := c.r.ReadString('\n')
	if err != nil {
		return "", err
	}
	return s[:len(s)-1], nil
}

func timeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// TestBlackholeHoldsUntilHeal: a black hole answers nothing, to open
// connections and new ones, and loses nothing: after Heal what was sent
// arrives, in order.
func TestBlackholeHoldsUntilHeal(t *testing.T) {
	p := Start(t, echoServer(t))
	old := dial(t, p)
	if got, err := old.ask("one", 5*time.Second); err != nil || got != "one" {
		t.Fatalf("before the fault: %q %v", got, err)
	}
	p.Blackhole()
	if got, err := old.ask("two", 200*time.Millisecond); !timeout(err) {
		t.Fatalf("open connection in a black hole: %q %v, want a timeout", got, err)
	}
	fresh := dial(t, p)
	if got, err := fresh.ask("three", 200*time.Millisecond); !timeout(err) {
		t.Fatalf("new connection in a black hole: %q %v, want a timeout", got, err)
	}
	// The open connection's line is read (when the proxy's goroutine
	// gets to it: a loaded machine may take longer than the timeouts
	// above) and held; the new one's waits unread in the kernel, as the
	// proxy does not dial during a black hole.
	if !testwait.Within(5*time.Second, func() bool { return p.Held() == 1 }) {
		t.Fatalf("%d chunks held in the black hole, want 1", p.Held())
	}
	p.Heal()
	for _, tc := range []struct {
		c    *client
		want string
	}{{old, "two"}, {fresh, "three"}} {
		tc.c.c.SetDeadline(time.Now().Add(5 * time.Second))
		got, err := tc.c.r.ReadString('\n')
		if err != nil || got != tc.want+"\n" {
			t.Fatalf("held line after Heal: %q %v, want %q", got, err, tc.want)
		}
	}
	if got, err := old.ask("four", 5*time.Second); err != nil || got != "four" {
		t.Fatalf("after Heal: %q %v", got, err)
	}
}

// TestResetAndDown: Reset ends the open connections with a reset and lets
// new ones through; Down refuses new ones too until Heal.
func TestResetAndDown(t *testing.T) {
	p := Start(t, echoServer(t))
	c := dial(t, p)
	if _, err := c.ask("one", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	p.Reset()
	if got, err := c.ask("two", 5*time.Second); !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, io.EOF) && !errors.Is(err, syscall.EPIPE) {
		t.Fatalf("after Reset: %q %v, want a reset", got, err)
	}
	if got, err := dial(t, p).ask("three", 5*time.Second); err != nil || got != "three" {
		t.Fatalf("new connection after Reset: %q %v", got, err)
	}
	p.Down()
	// The reset may come while the dial completes or on the first read:
	// either is a refusal, a timeout or an answer is not.
	if c, err := net.Dial("tcp", p.Addr()); err == nil {
		t.Cleanup(func() { c.Close() })
		cl := &client{c, bufio.NewReader(c)}
		if got, err := cl.ask("four", 5*time.Second); err == nil || timeout(err) {
			t.Fatalf("new connection while down: %q %v, want it refused", got, err)
		}
	}
	p.Heal()
	if got, err := dial(t, p).ask("five", 5*time.Second); err != nil || got != "five" {
		t.Fatalf("after Heal: %q %v", got, err)
	}
}

// TestDelay: a delayed proxy answers late but answers.
func TestDelay(t *testing.T) {
	p := Start(t, echoServer(t))
	c := dial(t, p)
	p.Delay(300 * time.Millisecond)
	if got, err := c.ask("slow", 100*time.Millisecond); !timeout(err) {
		t.Fatalf("delayed answer came at once: %q %v", got, err)
	}
	c.c.SetDeadline(time.Now().Add(5 * time.Second))
	if got, err := c.r.ReadString('\n'); err != nil || got != "slow\n" {
		t.Fatalf("delayed answer: %q %v", got, err)
	}
	// Heal ends a delay that has begun.
	p.Delay(time.Hour)
	if got, err := c.ask("held", 100*time.Millisecond); !timeout(err) {
		t.Fatalf("an hour's delay answered: %q %v", got, err)
	}
	p.Heal()
	c.c.SetDeadline(time.Now().Add(5 * time.Second))
	if got, err := c.r.ReadString('\n'); err != nil || got != "held\n" {
		t.Fatalf("delayed answer after Heal: %q %v", got, err)
	}
}
