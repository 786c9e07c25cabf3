package faultproxy

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/store"
)

// Outages is a store's test under network faults: s reaches its server
// through p, with deadlines of about limit/20. With the server
// black-holed, down, or its connection reset in flight, every read and
// write, one at a time or many at once, fails with thread.ErrUnavailable
// before limit, with a reason that
// names the store (server, e.g. "PostgreSQL") and no address; once p
// heals, the same Store serves again, and every append it acknowledged,
// before, during or after the faults, reads back.
func Outages(t *testing.T, s store.Store, p *Proxy, server string, limit time.Duration) {
	t.Helper()
	ctx := t.Context()
	db := thread.New(s, nil)
	th, err := db.Create(ctx, thread.CreateOptions{ID: "outage"})
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
	read := func() error { _, err := s.Thread(ctx, "outage"); return err }
	calls := []struct {
		name string
		f    func() error
	}{
		{"read a thread", read},
		{"list threads", func() error {
			for _, err := range s.Threads(ctx, thread.ListOptions{}) {
				return err
			}
			return nil
		}},
		{"read messages", func() error {
			h, err := db.Thread(ctx, "outage")
			if err == nil {
				_, err = h.Messages(ctx, thread.ReadOptions{})
			}
			return err
		}},
		{"append", func() error { return appendOne("during") }},
		{"16 reads at once", func() error { return atOnce(16, read) }},
		{"create", func() error { _, err := db.Create(ctx, thread.CreateOptions{}); return err }},
	}
	for _, fault := range []struct {
		name string
		make func()
	}{
		{"black hole", p.Blackhole},
		{"down", p.Down},
		{"reset in flight", func() {
			p.Blackhole()
			done := make(chan error, 1)
			go func() { _, err := s.Thread(ctx, "outage"); done <- err }()
			p.Down() // resets the connection the read waits on, or refuses its next
			if err := Within(t, limit, "a read reset in flight", func() error { return <-done }); !errors.Is(err, thread.ErrUnavailable) {
				t.Errorf("read reset in flight: %v, want ErrUnavailable", err)
			}
		}},
	} {
		serves(t, limit, "append before "+fault.name, func() error { return appendOne("before " + fault.name) })
		// Connections in the pool when the fault begins: closing one
		// that timed out must not hold the callers behind it (pgx's
		// close of a PostgreSQL connection waited 15 s for the server).
		atOnce(16, read)
		fault.make()
		for _, c := range calls {
			err := Within(t, limit, fault.name+": "+c.name, c.f)
			if !errors.Is(err, thread.ErrUnavailable) {
				t.Errorf("%s: %s: %v, want ErrUnavailable", fault.name, c.name, err)
				continue
			}
			var se *thread.StoreError
			if !errors.As(err, &se) || !strings.Contains(se.Reason, server) || strings.Contains(se.Reason, "127.0.0.1") {
				t.Errorf("%s: %s: %v: want a reason that names %s and no address", fault.name, c.name, err, server)
			}
		}
		p.Heal()
		// The same Store serves again, without a restart.
		serves(t, limit, "append after "+fault.name+" healed", func() error { return appendOne("after " + fault.name) })
	}
	h, err := db.Thread(ctx, "outage")
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

// serves calls f until it succeeds, failing the test if it has not by
// limit or fails otherwise than with thread.ErrUnavailable: a store whose
// network is sound serves, though its first calls may still meet the
// connections the fault broke, or a loaded machine answer one past the
// short deadline of the test.
func serves(t testing.TB, limit time.Duration, what string, f func() error) {
	t.Helper()
	end := time.Now().Add(limit)
	for {
		err := Within(t, limit, what, f)
		if err == nil {
			return
		}
		if !errors.Is(err, thread.ErrUnavailable) || time.Now().After(end) {
			t.Fatalf("%s: %v", what, err)
		}
	}
}

// Within runs f and returns its error, failing the test if f has not
// returned after limit: a call must end by its deadline, whatever the
// network does.
func Within(t testing.TB, limit time.Duration, what string, f func() error) error {
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

// atOnce makes n calls of f at once and returns an error of one that did
// not fail with thread.ErrUnavailable if there is one, else one of theirs.
func atOnce(n int, f func() error) error {
	errs := make(chan error, n)
	for range n {
		go func() { errs <- f() }()
	}
	var first error
	for range n {
		err := <-errs
		if first == nil || errors.Is(first, thread.ErrUnavailable) && !errors.Is(err, thread.ErrUnavailable) {
			first = err
		}
	}
	return first
}
