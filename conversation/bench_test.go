package conversation

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loomthreads/loom/agent/scripted"
	"github.com/loomthreads/loom/internal/cputime"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

// BenchmarkDelta is the conversation's own cost per streamed delta: the
// agent applying it to its streaming block and the event reaching the
// event loop, with nothing displayed (a turn of 10,000 one-rune deltas
// from the scripted client, on the memory store; ns/delta).
// With a listener (Notify), each content notice also carries a copy of
// the streaming block's text, as loom chat and the HTTP event stream
// want: a turn of 1,000 deltas.
func BenchmarkDelta(b *testing.B) {
	for _, c := range []struct {
		name   string
		deltas int
		notify func(Notice)
	}{{"alone", 10_000, nil}, {"with-a-listener", 1_000, func(Notice) {}}} {
		b.Run(c.name, func(b *testing.B) { benchDelta(b, c.deltas, c.notify) })
	}
}

func benchDelta(b *testing.B, deltas int, notify func(Notice)) {
	client := scripted.New(scripted.Text(strings.Repeat("x", deltas)))
	client.Repeat, client.ChunkSize, client.Record = true, 1, false
	c, err := New(context.Background(), thread.New(thread.NewMemoryStore(), nil), Options{Client: client, Notify: notify})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close(context.Background())
	ctx := context.Background()
	turns := 0
	for b.Loop() {
		if err := c.Send(context.Background(), message.User("go"), false); err != nil {
			b.Fatal(err)
		}
		waitIdle(ctx, b, c)
		turns++
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(turns*deltas), "ns/delta")
}

// waitIdle waits for the turn Send started: on its stream's channel, so
// that the benchmark times the turn and not a poll's interval, then for the
// conversation to handle the stop.
func waitIdle(ctx context.Context, b *testing.B, c *Conversation) {
	b.Helper()
	c.agent.mu.Lock()
	done := c.agent.done
	c.agent.mu.Unlock()
	if done != nil {
		<-done
	}
	if err := c.Wait(ctx); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkStop is the cost of committing a stop on SQLite: the turn's
// new messages (a question and an answer) with the mode and status, in
// one commit.
func BenchmarkStop(b *testing.B) {
	db, err := thread.Open(context.Background(), "sqlite://"+filepath.Join(b.TempDir(), "c.db"), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	c, err := New(context.Background(), db, Options{Client: scripted.New()})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close(context.Background())
	for b.Loop() {
		c.do(func() error {
			c.agent.mu.Lock()
			c.agent.msgs = append(c.agent.msgs, message.User("a question of some length"), message.Assistant("an answer of some length, longer than the question"))
			c.agent.mu.Unlock()
			c.commitStop(context.Background())
			return nil
		})
	}
}

// BenchmarkStopBesideTurn is a committed stop on SQLite measured side by
// side with its floor, in one run: each iteration commits a stop of a turn
// (a 200-byte question and a 600-byte answer, with the mode and status)
// and then appends the same two messages as one chat turn to a thread of
// the same database. It reports µs/stop, µs/turn and their ratio, and the
// CPU time the process spent in each (cpu-µs/stop, cpu-µs/turn). Both
// threads are replaced every 1,000 turns, off the clock, so that neither
// grows with b.N.
func BenchmarkStopBesideTurn(b *testing.B) {
	ctx := context.Background()
	db, err := thread.Open(ctx, "sqlite://"+filepath.Join(b.TempDir(), "c.db"), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	user, assistant := message.User(strings.Repeat("u", 200)), message.Assistant(strings.Repeat("a", 600))
	var c *Conversation
	var floor *thread.Thread
	fresh := func() {
		if c != nil {
			c.Close(context.Background())
		}
		if c, err = New(ctx, db, Options{Client: scripted.New()}); err != nil {
			b.Fatal(err)
		}
		if floor, err = db.Create(ctx, thread.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	fresh()
	defer func() { c.Close(context.Background()) }()
	var stopTime, turnTime, stopCPU, turnCPU time.Duration
	n := 0
	for b.Loop() {
		if n > 0 && n%1000 == 0 {
			b.StopTimer()
			fresh()
			b.StartTimer()
		}
		n++
		c.do(func() error {
			c.agent.mu.Lock()
			c.agent.msgs = append(c.agent.msgs, user, assistant)
			c.agent.mu.Unlock()
			start, cpu := time.Now(), cputime.Process()
			err := c.commitStop(context.Background())
			stopTime += time.Since(start)
			stopCPU += cputime.Process() - cpu
			if err != nil {
				b.Error(err)
			}
			return nil
		})
		start, cpu := time.Now(), cputime.Process()
		if _, err := floor.Append(ctx, user, assistant); err != nil {
			b.Fatal(err)
		}
		turnTime += time.Since(start)
		turnCPU += cputime.Process() - cpu
	}
	stop := float64(stopTime.Nanoseconds()) / 1e3 / float64(n)
	turn := float64(turnTime.Nanoseconds()) / 1e3 / float64(n)
	b.ReportMetric(stop, "µs/stop")
	b.ReportMetric(turn, "µs/turn")
	b.ReportMetric(stop/turn, "stop/turn")
	b.ReportMetric(float64(stopCPU.Nanoseconds())/1e3/float64(n), "cpu-µs/stop")
	b.ReportMetric(float64(turnCPU.Nanoseconds())/1e3/float64(n), "cpu-µs/turn")
}
