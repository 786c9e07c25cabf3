package agent_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/loomthreads/loom/agent"
	"github.com/loomthreads/loom/agent/scripted"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

// BenchmarkRunTwoStepTool measures the agent's own cost of a run that calls
// one tool and then answers, on SQLite: everything but the model (the
// scripted client answers at once). Each run commits three steps (input,
// call with result, answer) and reads two views of up to 8,000 tokens.
// "chat" replaces the thread every 10 runs, off the clock (a conversation
// of up to 40 messages); "long" every 1,000 runs, so the views read
// hundreds of messages.
func BenchmarkRunTwoStepTool(b *testing.B) {
	for _, bc := range []struct {
		store string
		every int
	}{{"memory", 10}, {"sqlite", 10}, {"memory", 1000}, {"sqlite", 1000}} {
		name := bc.store + "/chat"
		if bc.every > 10 {
			name = bc.store + "/long"
		}
		store := bc.store
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			url := "memory://"
			if store == "sqlite" {
				url = "sqlite://" + filepath.Join(b.TempDir(), "bench.db")
			}
			db, err := thread.Open(ctx, url, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			client := scripted.New(
				scripted.Calls(message.FunctionCall{CallID: "c1", Name: "weather", Arguments: `{"city":"Paris"}`}),
				scripted.Text("It is 21 °C in Paris."),
			)
			client.Repeat, client.Record = true, false
			a := agent.New(client, &agent.Options{
				Instructions: "Be brief.",
				Tools:        []agent.Tool{weatherTool(b)},
				View:         thread.ViewOptions{Budget: 8000},
			})
			var th *thread.Thread
			runs := 0
			b.ReportAllocs()
			for b.Loop() {
				if runs%bc.every == 0 {
					b.StopTimer()
					if th, err = a.NewThread(ctx, db, thread.CreateOptions{}); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
				runs++
				if _, err := a.Run(ctx, th, message.User("Weather in Paris?")); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRunRoundRobin runs the agent on 700 threads of 500 messages in
// turn, in memory, with a model that answers at once: two commits a run
// (input, answer) and a view of up to 2,000 tokens. The input ids the agent
// makes are new by construction (thread.CommitOptions.FreshIDs): with more
// threads than the DB remembers the lines of, a run costs what one run on
// one thread costs, not a read of the whole thread.
func BenchmarkRunRoundRobin(b *testing.B) {
	const threads, length = 700, 500
	ctx := context.Background()
	db, err := thread.Open(ctx, "memory://", nil)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	client := scripted.New(scripted.Text("ok"))
	client.Repeat, client.Record = true, false
	a := agent.New(client, &agent.Options{View: thread.ViewOptions{Budget: 2000}})
	ths := make([]*thread.Thread, threads)
	for i := range ths {
		msgs := make([]message.Message, length)
		for j := range msgs {
			msgs[j] = message.User("earlier")
		}
		if ths[i], err = db.Create(ctx, thread.CreateOptions{Kind: thread.KindLocal, Messages: msgs}); err != nil {
			b.Fatal(err)
		}
	}
	i := 0
	run := func() {
		if _, err := a.Run(ctx, ths[i%threads], message.User("hi")); err != nil {
			b.Fatal(err)
		}
		i++
	}
	for range threads {
		run()
	}
	b.ReportAllocs()
	for b.Loop() {
		run()
	}
}
