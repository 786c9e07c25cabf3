package agent_test

import (
	"context"
	"fmt"

	"github.com/loomthreads/loom/agent"
	"github.com/loomthreads/loom/agent/scripted"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

func Example() {
	ctx := context.Background()
	db, _ := thread.Open(ctx, "memory://", nil)
	defer db.Close()

	type weatherIn struct {
		City string `json:"city" jsonschema:"the city"`
	}
	weather := agent.MustFunc("weather", "Current weather of a city.",
		func(ctx context.Context, in weatherIn) (string, error) {
			return fmt.Sprintf(`{"city":%q,"temp_c":21}`, in.City), nil
		})
	// A scripted model: it calls the tool, then answers.
	client := scripted.New(
		scripted.Calls(message.FunctionCall{CallID: "c1", Name: "weather", Arguments: `{"city":"Paris"}`}),
		scripted.Text("It is 21 °C in Paris."),
	)
	a := agent.New(client, &agent.Options{Instructions: "Be brief.", Tools: []agent.Tool{weather}})

	th, _ := a.NewThread(ctx, db, thread.CreateOptions{})
	res, err := a.Run(ctx, th, message.User("Weather in Paris?"))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Text())
	fmt.Println("kind:", th.Kind())
	msgs, _ := th.Messages(ctx, thread.ReadOptions{})
	for _, m := range msgs {
		fmt.Println(m.Role, m.Text(), len(m.Calls()), len(m.Results()))
	}
	// Output:
	// It is 21 °C in Paris.
	// kind: local
	// user Weather in Paris? 0 0
	// assistant  1 0
	// tool  0 1
	// assistant It is 21 °C in Paris. 0 0
}

func ExampleAgent_RunStream() {
	ctx := context.Background()
	db, _ := thread.Open(ctx, "memory://", nil)
	defer db.Close()
	a := agent.New(scripted.New(scripted.Text("Hello there!")), nil)
	th, _ := a.NewLocalThread(ctx, db, thread.CreateOptions{})

	for ev, err := range a.RunStream(ctx, th, message.User("hi")) {
		switch {
		case err != nil:
			fmt.Println("error:", err)
		case ev.Update != nil:
			fmt.Printf("%q ", ev.Update.Text)
		case ev.Step != nil:
			fmt.Printf("[%s committed]", ev.Step.Kind)
		case ev.Result != nil:
			fmt.Println("\nversion", ev.Result.Version)
		}
	}
	// Output:
	// [input committed]"Hell" "o th" "ere!" [answer committed]
	// version 3
}

func ExampleAgent_Invoke_approval() {
	ctx := context.Background()
	db, _ := thread.Open(ctx, "memory://", nil)
	defer db.Close()
	type payIn struct {
		Amount int `json:"amount"`
	}
	pay := agent.MustFunc("pay", "Pays an amount.", func(ctx context.Context, in payIn) (string, error) {
		return fmt.Sprintf("paid %d", in.Amount), nil
	}, agent.WithApproval())
	client := scripted.New(
		scripted.Calls(message.FunctionCall{CallID: "p1", Name: "pay", Arguments: `{"amount":5}`}),
		scripted.Text("Done: paid 5."),
	)
	a := agent.New(client, &agent.Options{Tools: []agent.Tool{pay}})
	th, _ := a.NewLocalThread(ctx, db, thread.CreateOptions{})

	res, _ := a.Run(ctx, th, message.User("Pay 5."))
	for _, p := range res.Pending {
		fmt.Println("waiting for approval:", p.Name, p.Arguments)
	}
	// Later, perhaps in another process: approve and continue.
	res, _ = a.Invoke(ctx, th, agent.Request{Approvals: []agent.Approval{{CallID: "p1", Approved: true}}})
	fmt.Println(res.Text())
	// Output:
	// waiting for approval: pay {"amount":5}
	// Done: paid 5.
}

func ExampleAgent_NewServiceThread() {
	ctx := context.Background()
	db, _ := thread.Open(ctx, "memory://", nil)
	defer db.Close()
	// A client whose service keeps conversations and chains responses by
	// id, as OpenAI's Responses API does.
	client := scripted.New(scripted.Step{Text: "Hi!", ConversationID: "auto"})
	client.Caps.ServiceThreads, client.Caps.Chaining = true, true
	a := agent.New(client, nil)

	th, _ := a.NewServiceThread(ctx, db, "", thread.CreateOptions{})
	a.Run(ctx, th, message.User("hello"))
	id, _ := agent.ServiceID(ctx, th)
	fmt.Println(agent.IsServiceManaged(th), id)
	// Output:
	// true resp_1
}
