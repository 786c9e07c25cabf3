package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loomthreads/loom/internal/testserver"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

// TestBusyIsNotUnavailable: the store's Timeout is for a server that does
// not answer, not for a busy one. Writers to one hot thread that wait
// longer than Timeout for the thread's row (another transaction holds it)
// or for a connection of the pool (all in use) wait their turn: none is
// told that PostgreSQL is unavailable (a lock wait past Timeout is a
// conflict, tried again), and every append acknowledged reads back once.
func TestBusyIsNotUnavailable(t *testing.T) {
	const timeout = 300 * time.Millisecond
	dsn := testserver.Postgres(t)
	for _, tc := range []struct {
		name     string
		maxConns int32
		// hold makes the server busy for the writers until release.
		hold func(t *testing.T, s *Store, id string) (release func())
	}{
		{"row lock", 16, func(t *testing.T, s *Store, id string) func() {
			conn, err := pgx.Connect(t.Context(), dsn)
			if err != nil {
				t.Fatal(err)
			}
			tx, err := conn.Begin(t.Context())
			if err == nil {
				_, err = tx.Exec(t.Context(), `SELECT 1 FROM loom_threads WHERE id = $1 FOR UPDATE`, id)
			}
			if err != nil {
				t.Fatal(err)
			}
			return func() {
				tx.Commit(context.Background())
				conn.Close(context.Background())
			}
		}},
		{"pool", 2, func(t *testing.T, s *Store, id string) func() {
			var held []*pgxpool.Conn
			for range 2 {
				c, err := s.pool.Acquire(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				held = append(held, c)
			}
			return func() {
				for _, c := range held {
					c.Release()
				}
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			s := open(t, dsn, &Options{Timeout: timeout, MaxConns: tc.maxConns, NoNotify: true})
			db := thread.New(s, nil)
			id := fmt.Sprintf("hot-%d", tc.maxConns)
			if _, err := db.Create(ctx, thread.CreateOptions{ID: id}); err != nil {
				t.Fatal(err)
			}
			const writers = 12
			handles := make([]*thread.Thread, writers) // a handle each: one handle's writes take turns
			for i := range handles {
				h, err := db.Thread(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				handles[i] = h
			}
			release := tc.hold(t, s, id)
			var (
				wg    sync.WaitGroup
				mu    sync.Mutex
				acked []string
			)
			for i, h := range handles {
				wg.Go(func() {
					text := fmt.Sprint(i)
					_, err := h.Append(ctx, message.User(text))
					switch {
					case err == nil:
						mu.Lock()
						acked = append(acked, text)
						mu.Unlock()
					case errors.Is(err, thread.ErrConflict):
					default:
						t.Errorf("append to a busy thread: %v, want success or a conflict", err)
					}
				})
			}
			// The server is busy for twice the store's Timeout: the
			// writers wait past it.
			time.AfterFunc(2*timeout, release)
			wg.Wait()
			h, err := db.Thread(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			msgs, err := h.Messages(ctx, thread.ReadOptions{})
			if err != nil || len(msgs) != len(acked) {
				t.Fatalf("read back %d messages (%v), %d appends acknowledged", len(msgs), err, len(acked))
			}
			if len(acked) == 0 {
				t.Fatal("no append succeeded")
			}
		})
	}
}

// TestHotThreadDeadline: many writers appending at once to one thread,
// each with a handle of its own, through a small pool and a large one: all
// succeed or conflict, none is told PostgreSQL is unavailable, and what
// was acknowledged reads back.
func TestHotThreadDeadline(t *testing.T) {
	dsn := testserver.Postgres(t)
	for _, maxConns := range []int32{2, 32} {
		t.Run(fmt.Sprintf("MaxConns=%d", maxConns), func(t *testing.T) {
			ctx := t.Context()
			s := open(t, dsn, &Options{Timeout: time.Second, MaxConns: maxConns, NoNotify: true})
			db := thread.New(s, nil)
			id := fmt.Sprintf("hot-%d", maxConns)
			if _, err := db.Create(ctx, thread.CreateOptions{ID: id}); err != nil {
				t.Fatal(err)
			}
			const writers, each = 100, 2
			var (
				wg    sync.WaitGroup
				mu    sync.Mutex
				acked int
			)
			for w := range writers {
				wg.Go(func() {
					th, err := db.Thread(ctx, id)
					if err != nil {
						t.Error(err)
						return
					}
					for i := range each {
						_, err := th.Append(ctx, message.User(fmt.Sprintf("%d.%d", w, i)))
						switch {
						case err == nil:
							mu.Lock()
							acked++
							mu.Unlock()
						case errors.Is(err, thread.ErrConflict):
						default:
							t.Errorf("append to a hot thread: %v, want success or a conflict", err)
							return
						}
					}
				})
			}
			wg.Wait()
			h, err := db.Thread(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			msgs, err := h.Messages(ctx, thread.ReadOptions{})
			if err != nil || len(msgs) != acked {
				t.Fatalf("read back %d messages (%v), %d appends acknowledged", len(msgs), err, acked)
			}
		})
	}
}
