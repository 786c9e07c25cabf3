// Foundry adopts a thread that already lives in the Foundry Agent Service
// and goes on with it from a loom agent: the service keeps the
// conversation, loom keeps its id and a mirror of its messages, so that
// the thread shows in loom's views, history and every interface.
//
//	export AZURE_AI_PROJECT_ENDPOINT=https://<resource>.services.ai.azure.com/api/projects/<project>
//	export AZURE_AI_AGENT_ID=asst_…        # classic agents; AZURE_AI_AGENT_NAME for the current ones
//	az login                               # or AZURE_AI_API_KEY, or AZURE_CLIENT_ID/SECRET/TENANT_ID
//	go run ./examples/foundry -thread thread_abc -say "Where were we?"
//	go run ./examples/foundry -protocol current -thread conv_abc -say "Go on."
//	go run ./cmd/loom threads list --store sqlite://./foundry.db --kind service
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/loomthreads/loom/agent"
	"github.com/loomthreads/loom/foundry"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"

	_ "github.com/loomthreads/loom/sqlite"
)

type options struct {
	store, protocol, thread, say string
	// endpoint, agent and key override the environment (tests).
	endpoint, agent, key string
}

func main() {
	var o options
	flag.StringVar(&o.store, "store", "sqlite://./foundry.db", "store URL")
	flag.StringVar(&o.protocol, "protocol", "classic", "the Foundry protocol: classic (threads, runs) or current (Responses, Conversations)")
	flag.StringVar(&o.thread, "thread", "", "the id of the Foundry thread (classic) or conversation (current) to adopt")
	flag.StringVar(&o.say, "say", "Where were we?", "what to say")
	flag.Parse()
	if err := run(context.Background(), os.Stdout, o); err != nil {
		fmt.Fprintln(os.Stderr, "foundry:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, out io.Writer, o options) error {
	if o.thread == "" {
		return errors.New("-thread: the id of the Foundry thread to adopt")
	}
	var client agent.ChatClient
	var err error
	switch o.protocol {
	case "classic":
		client, err = foundry.NewClassic(foundry.ClassicOptions{Endpoint: o.endpoint, Agent: o.agent, APIKey: o.key})
	case "current":
		client, err = foundry.NewCurrent(foundry.Options{Endpoint: o.endpoint, Agent: o.agent, APIKey: o.key})
	default:
		err = fmt.Errorf("-protocol %q: classic or current", o.protocol)
	}
	if err != nil {
		return err
	}
	db, err := thread.Open(ctx, o.store, nil)
	if err != nil {
		return err
	}
	defer db.Close()
	a := agent.New(client, nil)

	// The loom thread that adopted this Foundry thread, or a new one.
	id := "foundry-" + o.thread
	th, err := db.Thread(ctx, id)
	if errors.Is(err, thread.ErrNotFound) {
		th, err = a.NewServiceThread(ctx, db, o.thread, thread.CreateOptions{ID: id, Title: "Foundry " + o.thread})
		if err == nil {
			fmt.Fprintf(out, "adopted %s as loom thread %s\n", o.thread, th.ID())
		}
	}
	if err != nil {
		return err
	}
	res, err := a.Run(ctx, th, message.User(o.say))
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "agent: %s\n", res.Text())
	msgs, err := th.Messages(ctx, thread.ReadOptions{})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "loom thread %s (kind %s, version %d) mirrors %d messages\n", th.ID(), th.Kind(), th.Version(), len(msgs))
	return nil
}
