// Quickstart shows loom's threads in one run: a chat that is appended to,
// checkpointed, forked, rolled back, read at an old version and saved as a
// portable document.
//
//	go run ./examples/quickstart                            # in memory
//	go run ./examples/quickstart -store sqlite://./quick.db  # durable: run it twice
//	go run ./examples/quickstart -save t.json               # and export the thread
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"

	// The stores, so that -store takes any of their URLs.
	_ "github.com/loomthreads/loom/jsonfile"
	_ "github.com/loomthreads/loom/postgres"
	_ "github.com/loomthreads/loom/redis"
	_ "github.com/loomthreads/loom/sqlite"
)

func main() {
	store := flag.String("store", "memory://", "store URL: memory://, sqlite://PATH, file://DIR, postgres://…, redis://…")
	save := flag.String("save", "", "also save the thread, with its history, to this file")
	flag.Parse()
	if err := run(context.Background(), os.Stdout, *store, *save); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, out io.Writer, storeURL, savePath string) error {
	db, err := thread.Open(ctx, storeURL, nil)
	if err != nil {
		return err
	}
	defer db.Close()

	th, err := db.Create(ctx, thread.CreateOptions{Title: "Weekend in Lisbon", Labels: map[string]string{"app": "quickstart"}})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "created thread %s (%s)\n", th.ID(), th.Title())

	// A turn with a tool call: one commit, so the call never loses its result.
	if _, err := th.Append(ctx, message.System("You plan short trips."), message.User("Find me a train to Lisbon on Saturday.")); err != nil {
		return err
	}
	found, err := th.Append(ctx,
		message.ToolCall("call_1", "search_trains", `{"to":"Lisbon","day":"Saturday"}`),
		message.ToolResult("call_1", `[{"departs":"09:10"},{"departs":"13:40"}]`),
		message.Assistant("There are trains at 09:10 and 13:40."),
	)
	if err != nil {
		return err
	}
	if _, err := th.Checkpoint(ctx, "trains-found"); err != nil {
		return err
	}
	if _, err := th.Append(ctx, message.User("The 09:10, please."), message.Assistant("Booked the 09:10.")); err != nil {
		return err
	}

	// Branch at the assistant's answer: what if the user had picked the
	// afternoon train? The fork shares the first five messages; nothing is copied.
	alt, err := th.Fork(ctx, thread.ForkOptions{At: found.Messages[2].ID, Title: "afternoon variant"})
	if err != nil {
		return err
	}
	if _, err := alt.Append(ctx, message.User("The 13:40, please."), message.Assistant("Booked the 13:40.")); err != nil {
		return err
	}
	show(ctx, out, "main thread", th, thread.ReadOptions{Last: 2})
	show(ctx, out, "fork "+alt.ID(), alt, thread.ReadOptions{Last: 2})

	// Roll back to the checkpoint: a new version, nothing rewritten.
	booked := th.Version()
	if err := th.Rollback(ctx, "trains-found"); err != nil {
		return err
	}
	show(ctx, out, fmt.Sprintf("after rollback (version %d)", th.Version()), th, thread.ReadOptions{Last: 1})
	show(ctx, out, fmt.Sprintf("time travel to version %d", booked), th, thread.ReadOptions{Version: booked, Last: 1})

	fmt.Fprintln(out, "history:")
	for e, err := range th.History(ctx, thread.HistoryOptions{}) {
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "  v%d %s\n", e.Version, e.Op)
	}
	if savePath != "" {
		f, err := os.Create(savePath)
		if err != nil {
			return err
		}
		if err := th.Save(ctx, f, thread.SaveOptions{History: true}); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
		fmt.Fprintf(out, "saved to %s\n", savePath)
	}
	return nil
}

func show(ctx context.Context, out io.Writer, title string, th *thread.Thread, opts thread.ReadOptions) {
	msgs, err := th.Messages(ctx, opts)
	if err != nil {
		fmt.Fprintf(out, "%s: %v\n", title, err)
		return
	}
	fmt.Fprintf(out, "%s:\n", title)
	for _, m := range msgs {
		text := m.Text()
		for _, c := range m.Calls() {
			text = fmt.Sprintf("calls %s(%s)", c.Name, c.Arguments)
		}
		for _, r := range m.Results() {
			text = "→ " + r.Result
		}
		fmt.Fprintf(out, "  %-9s %s\n", m.Role, text)
	}
}
