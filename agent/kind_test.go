package agent_test

// The ten tests of seed 000 (spec/agent.md, "Thread kind rules"), each its
// own test, plus the rules loom adds.

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/loomthreads/loom/agent"
	"github.com/loomthreads/loom/agent/scripted"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

func TestThreadCreatedWithServiceIDIsServiceManaged(t *testing.T) {
	ctx := t.Context()
	a := agent.New(serviceClient(), nil)
	th, err := a.NewServiceThread(ctx, memDB(t), "conv_1", thread.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if th.Kind() != thread.KindService {
		t.Fatalf("kind %s, want service", th.Kind())
	}
	id, err := agent.ServiceID(ctx, th)
	if err != nil || id != "conv_1" {
		t.Fatalf("ServiceID = %q, %v; want conv_1", id, err)
	}
	// The id is durable: a fresh handle from the store sees it.
	again, err := th.DB().Thread(ctx, th.ID())
	if err != nil {
		t.Fatal(err)
	}
	if id, _ := agent.ServiceID(ctx, again); id != "conv_1" || again.Kind() != thread.KindService {
		t.Fatalf("reloaded: kind %s id %q", again.Kind(), id)
	}
}

func TestIsServiceManaged(t *testing.T) {
	ctx := t.Context()
	db := memDB(t)
	a := agent.New(serviceClient(), nil)
	svc, err := a.NewServiceThread(ctx, db, "conv_1", thread.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	local, err := a.NewLocalThread(ctx, db, thread.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	und, err := a.NewThread(ctx, db, thread.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !agent.IsServiceManaged(svc) || agent.IsServiceManaged(local) || agent.IsServiceManaged(und) {
		t.Fatalf("IsServiceManaged: service %v local %v undetermined %v", agent.IsServiceManaged(svc), agent.IsServiceManaged(local), agent.IsServiceManaged(und))
	}
	if local.Kind() != thread.KindLocal || und.Kind() != thread.KindUndetermined {
		t.Fatalf("kinds %s %s", local.Kind(), und.Kind())
	}
}

func TestServiceIDWithLocalMessagesFails(t *testing.T) {
	ctx := t.Context()
	db := memDB(t)
	a := agent.New(serviceClient(), nil)
	_, err := a.NewServiceThread(ctx, db, "conv_1", thread.CreateOptions{Messages: []message.Message{message.User("hi")}})
	if !errors.Is(err, thread.ErrInvalid) {
		t.Fatalf("err = %v, want ErrInvalid", err)
	}
	for th, err := range db.Threads(ctx, thread.ListOptions{}) {
		t.Fatalf("a thread was created: %v %v", th, err)
	}
}

func TestRunUpdatesThreadWithConversationID(t *testing.T) {
	ctx := t.Context()
	client := serviceClient(scripted.Step{Text: "hello", ConversationID: "resp_2"})
	a := agent.New(client, nil)
	th, err := a.NewServiceThread(ctx, memDB(t), "resp_1", thread.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Run(ctx, th, message.User("hi")); err != nil {
		t.Fatal(err)
	}
	if id, _ := agent.ServiceID(ctx, th); id != "resp_2" {
		t.Fatalf("ServiceID = %q, want resp_2", id)
	}
}

func TestServiceThreadWithoutConversationIDFails(t *testing.T) {
	ctx := t.Context()
	client := serviceClient(scripted.Step{Text: "hello"}) // no conversation id
	a := agent.New(client, nil)
	th, err := a.NewServiceThread(ctx, memDB(t), "conv_1", thread.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := a.Run(ctx, th, message.User("hi"))
	if !errors.Is(err, agent.ErrNoConversationID) {
		t.Fatalf("err = %v, want ErrNoConversationID", err)
	}
	if res == nil || res.Response == nil {
		t.Fatalf("result %+v: want the response the run got", res)
	}
	// The answer the service did not keep is not in the thread, and the
	// thread is still the same service thread.
	if got := transcript(messages(t, th)); got != "user:hi" {
		t.Fatalf("thread:\n%s", got)
	}
	if id, _ := agent.ServiceID(ctx, th); id != "conv_1" || th.Kind() != thread.KindService {
		t.Fatalf("kind %s id %q", th.Kind(), id)
	}
}

func TestContextProviderToldThreadCreated(t *testing.T) {
	ctx := t.Context()
	p := &recorder{name: "mem"}
	client := serviceClient(scripted.Step{Text: "hi", ConversationID: "resp_9"})
	a := agent.New(client, &agent.Options{Providers: []agent.ContextProvider{p}})
	db := memDB(t)
	svc, err := a.NewServiceThread(ctx, db, "conv_1", thread.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := providerState(t, svc, "mem"); got.ServiceID != "conv_1" || got.Created != 1 {
		t.Fatalf("state after NewServiceThread: %+v", got)
	}
	und, err := a.NewThread(ctx, db, thread.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Run(ctx, und, message.User("hello")); err != nil {
		t.Fatal(err)
	}
	want := []string{"created:service:conv_1", "created:undetermined:", "invoking:undetermined", "created:service:resp_9", "invoked:hi"}
	if got := p.events(); !slices.Equal(got, want) {
		t.Fatalf("hooks %q, want %q", got, want)
	}
	if got := providerState(t, und, "mem"); got.ServiceID != "resp_9" || got.Created != 2 || got.Runs != 1 {
		t.Fatalf("state after the run: %+v", got)
	}
}

func TestConversationIDPassedToClient(t *testing.T) {
	ctx := t.Context()
	client := serviceClient(scripted.Step{Text: "hello", ConversationID: "resp_2"})
	a := agent.New(client, &agent.Options{Instructions: "be brief"})
	th, err := a.NewServiceThread(ctx, memDB(t), "resp_1", thread.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Run(ctx, th, message.User("hi")); err != nil {
		t.Fatal(err)
	}
	req := client.Requests()[0]
	if req.Options.ConversationID != "resp_1" || req.Options.Store == nil || !*req.Options.Store {
		t.Fatalf("options: conversation %q store %v", req.Options.ConversationID, req.Options.Store)
	}
	if req.Options.Instructions != "be brief" {
		t.Fatalf("instructions %q", req.Options.Instructions)
	}
	// Only the new input is sent: the service has the rest.
	if got := transcript(req.Messages); got != "user:hi" {
		t.Fatalf("sent:\n%s", got)
	}
}

func TestUndeterminedThreadBecomesServiceManagedAfterFirstRun(t *testing.T) {
	ctx := t.Context()
	client := serviceClient(scripted.Step{Text: "hello", ConversationID: "resp_1"})
	a := agent.New(client, nil)
	th, err := a.NewThread(ctx, memDB(t), thread.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Run(ctx, th, message.User("hi")); err != nil {
		t.Fatal(err)
	}
	if th.Kind() != thread.KindService {
		t.Fatalf("kind %s, want service", th.Kind())
	}
	if id, _ := agent.ServiceID(ctx, th); id != "resp_1" {
		t.Fatalf("ServiceID %q", id)
	}
	if req := client.Requests()[0]; req.Options.Store != nil || req.Options.ConversationID != "" {
		t.Fatalf("first request of an undetermined thread: store %v conversation %q", req.Options.Store, req.Options.ConversationID)
	}
	// The thread mirrors the conversation for display.
	if got := transcript(messages(t, th)); got != "user:hi\nassistant:hello" {
		t.Fatalf("mirror:\n%s", got)
	}
}

func TestUndeterminedThreadBecomesLocalWithoutConversationID(t *testing.T) {
	ctx := t.Context()
	client := scripted.New(scripted.Text("hello"), scripted.Text("again"))
	a := agent.New(client, nil)
	th, err := a.NewThread(ctx, memDB(t), thread.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Run(ctx, th, message.User("hi")); err != nil {
		t.Fatal(err)
	}
	if th.Kind() != thread.KindLocal {
		t.Fatalf("kind %s, want local", th.Kind())
	}
	if _, err := a.Run(ctx, th, message.User("more")); err != nil {
		t.Fatal(err)
	}
	// A local thread sends its whole view and asks the service to keep
	// nothing.
	req := client.Requests()[1]
	if got := transcript(req.Messages); got != "user:hi\nassistant:hello\nuser:more" {
		t.Fatalf("second request:\n%s", got)
	}
	if req.Options.Store == nil || *req.Options.Store {
		t.Fatalf("store %v, want false", req.Options.Store)
	}
}

func TestSubsequentRunsUseExistingServiceThreadID(t *testing.T) {
	ctx := t.Context()
	client := serviceClient(
		scripted.Step{Text: "one", ConversationID: "resp_1"},
		scripted.Step{Text: "two", ConversationID: "resp_2"},
		scripted.Step{Text: "three", ConversationID: "resp_3"},
	)
	a := agent.New(client, nil)
	th, err := a.NewThread(ctx, memDB(t), thread.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range []string{"a", "b", "c"} {
		if _, err := a.Run(ctx, th, message.User(in)); err != nil {
			t.Fatal(err)
		}
	}
	reqs := client.Requests()
	for i, want := range []string{"", "resp_1", "resp_2"} {
		if reqs[i].Options.ConversationID != want {
			t.Fatalf("request %d conversation %q, want %q", i, reqs[i].Options.ConversationID, want)
		}
	}
	if got := transcript(reqs[2].Messages); got != "user:c" {
		t.Fatalf("third request sent:\n%s", got)
	}
}

func TestThreadKindDoesNotChangeAfterDetermination(t *testing.T) {
	ctx := t.Context()
	// A local thread stays local even if the service returns an id.
	client := serviceClient(
		scripted.Text("no id"),
		scripted.Step{Text: "with id", ConversationID: "resp_1"},
	)
	a := agent.New(client, nil)
	th, err := a.NewThread(ctx, memDB(t), thread.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range []string{"a", "b"} {
		if _, err := a.Run(ctx, th, message.User(in)); err != nil {
			t.Fatal(err)
		}
	}
	if th.Kind() != thread.KindLocal {
		t.Fatalf("kind %s, want local", th.Kind())
	}
	if id, _ := agent.ServiceID(ctx, th); id != "" {
		t.Fatalf("local thread got service id %q", id)
	}
	// And the store refuses to change a determined kind.
	if _, err := th.Commit(ctx, thread.CommitOptions{Messages: []message.Message{message.User("x")}, Kind: thread.KindService}); !errors.Is(err, thread.ErrInvalid) {
		t.Fatalf("kind change: %v", err)
	}
}

func TestServiceThreadOnClientWithoutSupportFailsBeforeRequest(t *testing.T) {
	ctx := t.Context()
	db := memDB(t)
	svc, err := agent.New(serviceClient(), nil).NewServiceThread(ctx, db, "conv_1", thread.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	local := scripted.New(scripted.Text("never"))
	a := agent.New(local, nil)
	if _, err := a.Run(ctx, svc, message.User("hi")); !errors.Is(err, agent.ErrServiceThreads) || !errors.Is(err, thread.ErrUnsupported) {
		t.Fatalf("err = %v, want ErrServiceThreads", err)
	}
	if n := len(local.Requests()); n != 0 {
		t.Fatalf("%d requests sent", n)
	}
	if got := messages(t, svc); len(got) != 0 {
		t.Fatalf("thread changed: %s", transcript(got))
	}
	if _, err := a.NewServiceThread(ctx, db, "conv_2", thread.CreateOptions{}); !errors.Is(err, agent.ErrServiceThreads) {
		t.Fatalf("NewServiceThread on a local client: %v", err)
	}
}

func TestChainedServiceThreadForksFromOlderResponse(t *testing.T) {
	ctx := t.Context()
	client := serviceClient(
		scripted.Step{Text: "one", ConversationID: "auto"},
		scripted.Step{Text: "two", ConversationID: "auto"},
		scripted.Step{Text: "fork", ConversationID: "auto"},
		scripted.Step{Text: "back", ConversationID: "auto"},
	)
	a := agent.New(client, nil)
	th, err := a.NewServiceThread(ctx, memDB(t), "", thread.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Run(ctx, th, message.User("a")); err != nil {
		t.Fatal(err)
	}
	if _, err := th.Checkpoint(ctx, "after-one"); err != nil {
		t.Fatal(err)
	}
	first, _ := agent.ServiceID(ctx, th)
	if _, err := a.Run(ctx, th, message.User("b")); err != nil {
		t.Fatal(err)
	}
	msgs := messages(t, th)
	fork, err := th.Fork(ctx, thread.ForkOptions{At: msgs[1].ID})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Run(ctx, fork, message.User("c")); err != nil {
		t.Fatal(err)
	}
	if got := client.Requests()[2].Options.ConversationID; got != first {
		t.Fatalf("fork continued from %q, want the first response %q", got, first)
	}
	if err := th.Rollback(ctx, "after-one"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Run(ctx, th, message.User("d")); err != nil {
		t.Fatal(err)
	}
	if got := client.Requests()[3].Options.ConversationID; got != first {
		t.Fatalf("rollback continued from %q, want %q", got, first)
	}
}

func TestLinearServiceThreadRefusesForkAndRollback(t *testing.T) {
	ctx := t.Context()
	client := scripted.New(scripted.Step{Text: "one", ConversationID: "conv_1"})
	client.Caps.ServiceThreads = true // one conversation id, no chaining
	a := agent.New(client, nil)
	th, err := a.NewThread(ctx, memDB(t), thread.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := th.Append(ctx, message.User("before")); err != nil {
		t.Fatal(err)
	}
	if _, err := th.Checkpoint(ctx, "before"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Run(ctx, th, message.User("a")); err != nil {
		t.Fatal(err)
	}
	if _, err := th.Checkpoint(ctx, "after"); err != nil {
		t.Fatal(err)
	}
	if _, err := th.Fork(ctx, thread.ForkOptions{}); !errors.Is(err, thread.ErrUnsupported) {
		t.Fatalf("fork: %v, want ErrUnsupported", err)
	}
	if _, err := th.Copy(ctx, thread.ForkOptions{}); !errors.Is(err, thread.ErrUnsupported) {
		t.Fatalf("copy: %v, want ErrUnsupported", err)
	}
	if err := th.Rollback(ctx, "after"); !errors.Is(err, thread.ErrUnsupported) {
		t.Fatalf("rollback: %v, want ErrUnsupported", err)
	}
	// Before the conversation began there is nothing on the service to
	// contradict: going back there starts a new conversation.
	if err := th.Rollback(ctx, "before"); err != nil {
		t.Fatalf("rollback to before the conversation: %v", err)
	}
	if id, _ := agent.ServiceID(ctx, th); id != "" {
		t.Fatalf("service id after rollback %q", id)
	}
}

// On a service thread the service stores what each request sends, so a
// context provider's messages must not be sent again with every tool round
// of a run: the second request of the run carries them a second time.
func TestServiceThreadDoesNotResendProviderMessagesEachRound(t *testing.T) {
	ctx := t.Context()
	c := scripted.New(
		scripted.Step{Calls: []message.FunctionCall{call("w1", "weather", `{"city":"Oslo"}`)}, ConversationID: "conv_1"},
		scripted.Step{Text: "cold", ConversationID: "conv_1"},
	)
	c.Caps.ServiceThreads = true
	p := &recorder{name: "profile", ctx: &agent.Context{Messages: []message.Message{message.User("profile: likes tea")}}}
	a := agent.New(c, &agent.Options{Tools: []agent.Tool{weatherTool(t)}, Providers: []agent.ContextProvider{p}})
	th, err := a.NewServiceThread(ctx, memDB(t), "conv_1", thread.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Run(ctx, th, message.User("weather?")); err != nil {
		t.Fatal(err)
	}
	reqs := c.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests", len(reqs))
	}
	if !strings.Contains(reqs[0].Transcript(), "profile") {
		t.Fatalf("first request lacks the provider's message:\n%s", reqs[0].Transcript())
	}
	if tr := reqs[1].Transcript(); strings.Contains(tr, "profile") {
		t.Fatalf("the tool round re-sends the provider's message to a service that stored it:\n%s", tr)
	}
}

// New(nil, …) records "no chat client" for every run, but NewServiceThread
// on that agent dereferences the nil client.
func TestNewServiceThreadWithoutClientDoesNotPanic(t *testing.T) {
	a := agent.New(nil, nil)
	defer func() {
		if v := recover(); v != nil {
			t.Fatalf("NewServiceThread panicked: %v", v)
		}
	}()
	if _, err := a.NewServiceThread(t.Context(), memDB(t), "conv_1", thread.CreateOptions{}); err == nil {
		t.Fatal("NewServiceThread without a client succeeded")
	}
}

// An undetermined thread is determined by its first run (local when the
// response has no conversation id), even when the response has no messages.
func TestUndeterminedThreadDeterminedByEmptyResponse(t *testing.T) {
	ctx := t.Context()
	client := scripted.New(scripted.Step{Func: func(context.Context, scripted.Request) (*agent.ChatResponse, error) {
		return &agent.ChatResponse{FinishReason: agent.FinishContentFilter}, nil
	}})
	a := agent.New(client, nil)
	th, _ := a.NewThread(ctx, memDB(t), thread.CreateOptions{})
	if _, err := a.Run(ctx, th, message.User("hi")); err != nil {
		t.Fatal(err)
	}
	if err := th.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if th.Kind() != thread.KindLocal {
		t.Fatalf("kind %s after the first run", th.Kind())
	}
}

// Options.Chat says the agent sets ConversationID and Store itself: a local
// thread's requests must not carry the ones in Options.Chat.
func TestLocalThreadIgnoresConversationIDFromOptions(t *testing.T) {
	ctx := t.Context()
	client := scripted.New(scripted.Text("ok"))
	yes := true
	a := agent.New(client, &agent.Options{Chat: agent.ChatOptions{ConversationID: "conv_stale", Store: &yes}})
	th, _ := a.NewLocalThread(ctx, memDB(t), thread.CreateOptions{})
	if _, err := a.Run(ctx, th, message.User("hi")); err != nil {
		t.Fatal(err)
	}
	o := client.Requests()[0].Options
	if o.ConversationID != "" || o.Store == nil || *o.Store {
		t.Fatalf("local thread request: conversation %q, store %v", o.ConversationID, o.Store)
	}
}
