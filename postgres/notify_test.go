package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/jackc/pgx/v5"

	"github.com/loomthreads/loom/thread"
)

// TestNotifierQueue: past maxQueued the oldest batches go, and a gap
// takes their place; a send takes whole batches, in order, up to maxSend
// bytes.
func TestNotifierQueue(t *testing.T) {
	n := newNotifier(nil)
	n.started = true // no goroutine: the test takes
	const per = 1024
	batch := func(i int) []string {
		b := make([]string, per)
		for j := range b {
			b[j] = fmt.Sprint(i, "/", j)
		}
		return b
	}
	for i := range maxQueued/per + 2 {
		n.push(batch(i))
	}
	if n.n != maxQueued || !n.lost {
		t.Fatalf("queued %d notes (lost %v), want %d", n.n, n.lost, maxQueued)
	}
	notes, closed := n.take()
	if closed {
		t.Fatal("closed")
	}
	var nt note
	if err := json.Unmarshal([]byte(notes[0]), &nt); err != nil || len(nt.Changes) != 1 || nt.Changes[0].Kind != thread.ChangeGap {
		t.Fatalf("the first note sent: %s", notes[0])
	}
	if notes[1] != "2/0" || len(notes) != 1+maxQueued {
		t.Fatalf("sent %d notes from %s, want %d from 2/0", len(notes), notes[1], 1+maxQueued)
	}
	if n.n != 0 || n.queue != nil {
		t.Fatalf("left %d", n.n)
	}

	big := strings.Repeat("x", maxNote)
	for range 2 * maxSend / maxNote {
		n.push([]string{big, big})
	}
	notes, _ = n.take()
	if size := len(notes) * maxNote; size > maxSend || len(notes)%2 != 0 || size < maxSend-2*maxNote {
		t.Fatalf("sent %d notes of %d bytes", len(notes), maxNote)
	}
	// One batch bigger than maxSend goes whole.
	for n.n > 0 {
		n.take()
	}
	huge := make([]string, 2*maxSend/maxNote)
	for i := range huge {
		huge[i] = big
	}
	n.push(huge)
	if notes, _ = n.take(); len(notes) != len(huge) {
		t.Fatalf("sent %d notes of a batch of %d", len(notes), len(huge))
	}
}

// TestNotifierDown: a notifier that cannot connect drops the notes, after
// one try more, and Close does not wait for the database. In a synctest
// bubble, so that "the notifier waits for notes" is a state to wait for.
func TestNotifierDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var tries atomic.Int32
		n := newNotifier(func(context.Context) (*pgx.Conn, error) {
			tries.Add(1)
			return nil, errors.New("down")
		})
		n.push([]string{"a"})
		synctest.Wait() // the notifier gave up on "a" and waits for notes
		if got := tries.Load(); got != 2 {
			t.Fatalf("%d tries to connect, want 2: a lost note alone is no reason to try again", got)
		}
		n.push([]string{"b"}) // sent after a gap: tried twice more
		n.close()
		if got := tries.Load(); got != 4 {
			t.Fatalf("%d tries to connect, want 4", got)
		}
		if n.n != 0 || len(n.queue) != 0 {
			t.Fatalf("%d notes left after close", n.n)
		}
		n.push([]string{"c"}) // after close: dropped, no goroutine
		if n.n != 0 {
			t.Fatal("queued after close")
		}
	})
}
