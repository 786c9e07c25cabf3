package postgres

import (
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/loomthreads/loom/internal/faultproxy"
	"github.com/loomthreads/loom/internal/testserver"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

// behindProxy returns a fresh database's URL that reaches the server
// through a fault proxy, with the store's deadlines (URL: connect_timeout,
// timeout) set to d.
func behindProxy(t *testing.T, d time.Duration) (string, *faultproxy.Proxy) {
	t.Helper()
	u, err := url.Parse(testserver.Postgres(t))
	if err != nil {
		t.Fatal(err)
	}
	p := faultproxy.Start(t, u.Host)
	u.Host = p.Addr()
	q := u.Query()
	q.Set("connect_timeout", d.String())
	q.Set("timeout", d.String())
	u.RawQuery = q.Encode()
	return u.String(), p
}

// within runs f and returns its error, failing the test if f has not
// returned after limit: a store call must end by its deadline, whatever
// the network does.
func within(t *testing.T, limit time.Duration, what string, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(limit):
		t.Fatalf("%s did not return in %v", what, limit)
		return nil
	}
}

// TestOutages: with PostgreSQL black-holed, reset or down, every read and
// write fails with thread.ErrUnavailable by the store's deadline instead
// of hanging for the whole outage, the message names PostgreSQL and no
// address, and once the network heals the same Store serves again and
// has lost nothing it acknowledged.
func TestOutages(t *testing.T) {
	ctx := t.Context()
	const deadline = 500 * time.Millisecond
	dsn, p := behindProxy(t, deadline)
	s := open(t, dsn, nil)
	db := thread.New(s, nil)
	th, err := db.Create(ctx, thread.CreateOptions{ID: "t"})
	if err != nil {
		t.Fatal(err)
	}
	var acked []string
	appendOne := func(text string) error {
		_, err := th.Append(ctx, message.User(text))
		if err == nil {
			acked = append(acked, text)
		}
		return err
	}
	calls := []struct {
		name string
		f    func() error
	}{
		{"read a thread", func() error { _, err := s.Thread(ctx, "t"); return err }},
		{"list threads", func() error {
			for _, err := range s.Threads(ctx, thread.ListOptions{}) {
				return err
			}
			return nil
		}},
		{"read messages", func() error {
			h, err := db.Thread(ctx, "t")
			if err == nil {
				_, err = h.Messages(ctx, thread.ReadOptions{})
			}
			return err
		}},
		{"append", func() error { return appendOne("during") }},
		{"create", func() error { _, err := db.Create(ctx, thread.CreateOptions{}); return err }},
	}
	limit := 20 * deadline // generous: the bound, not the speed, is tested
	for _, fault := range []struct {
		name string
		make func()
	}{
		{"black hole", p.Blackhole},
		{"down", p.Down},
		{"reset in flight", func() {
			p.Blackhole()
			done := make(chan error, 1)
			go func() { _, err := s.Thread(ctx, "t"); done <- err }()
			p.Down() // resets the connection the read waits on
			if err := within(t, limit, "a read reset in flight", func() error { return <-done }); !errors.Is(err, thread.ErrUnavailable) {
				t.Errorf("read reset in flight: %v, want ErrUnavailable", err)
			}
		}},
	} {
		if err := appendOne("before " + fault.name); err != nil {
			t.Fatalf("append before %s: %v", fault.name, err)
		}
		fault.make()
		for _, c := range calls {
			err := within(t, limit, fault.name+": "+c.name, c.f)
			if !errors.Is(err, thread.ErrUnavailable) {
				t.Errorf("%s: %s: %v, want ErrUnavailable", fault.name, c.name, err)
				continue
			}
			var se *thread.StoreError
			if !errors.As(err, &se) || se.Reason == "" || strings.Contains(se.Reason, "127.0.0.1") {
				t.Errorf("%s: %s: reason %+v, want one naming PostgreSQL, no address", fault.name, c.name, se)
			}
		}
		p.Heal()
		// The same Store serves again, without a restart.
		if err := within(t, limit, "append after heal", func() error { return appendOne("after " + fault.name) }); err != nil {
			t.Fatalf("append after %s healed: %v", fault.name, err)
		}
	}
	h, err := db.Thread(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := h.Messages(ctx, thread.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, m := range msgs {
		have[m.Text()] = true
	}
	for _, a := range acked {
		if !have[a] {
			t.Errorf("acknowledged append %q lost", a)
		}
	}
}
