// Package agent runs agents on threads: a chat client (a model provider), Go
// functions as tools, context providers, and the run loop that commits each
// completed step to a thread, so that a crash, a cancel or a failed request
// never leaves a thread the next run cannot take.
//
// The smallest use, on the deterministic client of agent/scripted (package
// openai and package anthropic give real ones):
//
//	weather := agent.MustFunc("weather", "Current weather of a city.",
//		func(ctx context.Context, in struct{ City string `json:"city"` }) (string, error) {
//			return `{"temp_c":21}`, nil
//		})
//	a := agent.New(client, &agent.Options{Instructions: "Be brief.", Tools: []agent.Tool{weather}})
//	th, _ := a.NewThread(ctx, db, thread.CreateOptions{})
//	res, _ := a.Run(ctx, th, message.User("Weather in Paris?"))
//	fmt.Println(res.Text())
//
// # Steps
//
// A run commits its input, then each response that calls tools together with
// all of their results, then the final answer: one commit each, conditional
// on the version the run last wrote. A tool call is never stored without its
// result, except while it waits for approval (ApprovalTool). A cancelled or
// interrupted run commits what completed, with an error result for each call
// that did not finish.
//
// # Thread kinds
//
// A thread is undetermined until its first run, then local (loom keeps the
// messages and sends a view of them) or service-managed (the provider keeps
// the conversation under an id; loom keeps the id, the providers' state and a
// mirror of the messages). NewThread, NewLocalThread and NewServiceThread
// create each kind; IsServiceManaged and ServiceID read it. Once determined, a
// kind never changes. A service whose responses chain by id (OpenAI
// Responses) lets a service thread fork and roll back like a local one: the
// id of each point is in the thread state, versioned with the messages.
//
// # Context providers
//
// A ContextProvider adds instructions, messages and tools to each run. It
// keeps nothing per thread: its state is a JSON value in the thread's state
// under "ctx/<name>", so it travels with the thread through save, load, fork
// and copy.
//
// # Concurrency
//
// A second run on a thread that a run through the same thread.DB (or a
// WithTenant copy of it: open a DB once and share it) is running is
// rejected (ErrBusy), queued, or interrupts the first, as Request.OnBusy
// says. The DB keeps the runs, nothing process-wide does. Runs through
// other DBs or in other processes cannot interleave either: the loser's
// next commit fails with thread.ErrConflict.
package agent
