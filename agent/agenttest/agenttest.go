// Package agenttest checks a chat client against the thread kind rules of
// seed 000 (spec/agent.md): a thread is undetermined until its first run,
// then local or service-managed for good; a service thread keeps the
// service's conversation id, sends only what the service has not seen, and
// tells the context providers. Every provider runs the same table:
//
//	func TestKindRules(t *testing.T) {
//		agenttest.RunKindRules(t, agenttest.Provider{
//			New:          func(t *testing.T) agent.ChatClient { return client },
//			NewServiceID: func(t *testing.T) string { return makeConversation(t) },
//		})
//	}
//
// The rules that need a service to misbehave (no conversation id) or a
// client without service threads wrap the provider's client: they check
// loom's side with the provider's real requests and answers.
package agenttest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/loomthreads/loom/agent"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

// Provider is a chat client under test.
type Provider struct {
	// New returns a client for one rule; it may share its server.
	New func(t *testing.T) agent.ChatClient
	// NewServiceID makes an empty conversation (or thread) on the
	// service and returns its id, for a loom thread to adopt.
	NewServiceID func(t *testing.T) string
}

// RunKindRules runs the rules of seed 000 on p, each a subtest.
func RunKindRules(t *testing.T, p Provider) {
	for _, r := range []struct {
		name string
		run  func(*testing.T, Provider)
	}{
		{"ThreadCreatedWithServiceIDIsServiceManaged", createdWithServiceID},
		{"IsServiceManaged", isServiceManaged},
		{"ServiceIDWithLocalMessagesFails", serviceIDWithLocalMessages},
		{"RunUpdatesThreadWithConversationID", runUpdatesID},
		{"ServiceThreadWithoutConversationIDFails", withoutConversationID},
		{"ContextProviderToldThreadCreated", providerToldThreadCreated},
		{"ConversationIDPassedToClient", conversationIDPassed},
		{"UndeterminedThreadBecomesServiceManaged", becomesService},
		{"UndeterminedThreadBecomesLocalWithoutConversationID", becomesLocal},
		{"SubsequentRunsUseExistingServiceThreadID", subsequentRuns},
		{"ThreadKindDoesNotChangeAfterDetermination", kindDoesNotChange},
	} {
		t.Run(r.name, func(t *testing.T) { r.run(t, p) })
	}
}

func memDB(t *testing.T) *thread.DB {
	t.Helper()
	return thread.New(thread.NewMemoryStore(), nil)
}

func must[T any](t *testing.T) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func transcript(msgs []message.Message) string {
	var b []string
	for _, m := range msgs {
		b = append(b, string(m.Role)+":"+m.Text())
	}
	return strings.Join(b, "\n")
}

func messages(t *testing.T, th *thread.Thread) []message.Message {
	t.Helper()
	msgs, err := th.Messages(t.Context(), thread.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return msgs
}

// recording wraps a client: it keeps what each request carried, and can
// hide the service's conversation ids (and its service threads).
type recording struct {
	agent.ChatClient
	mu     sync.Mutex
	reqs   []sent
	hideID func() bool // drop the conversation id of this response
	local  bool        // say the client has no service threads
}

type sent struct {
	conversation string
	store        *bool
	msgs         []message.Message
}

func (r *recording) Capabilities() agent.Capabilities {
	c := r.ChatClient.Capabilities()
	if r.local {
		c.ServiceThreads, c.Chaining = false, false
	}
	return c
}

func (r *recording) record(msgs []message.Message, opts *agent.ChatOptions) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := sent{msgs: slices.Clone(msgs)}
	if opts != nil {
		s.conversation, s.store = opts.ConversationID, opts.Store
	}
	r.reqs = append(r.reqs, s)
}

func (r *recording) fix(resp *agent.ChatResponse) {
	if resp != nil && r.hideID != nil && r.hideID() {
		resp.ConversationID = ""
	}
}

func (r *recording) Response(ctx context.Context, msgs []message.Message, opts *agent.ChatOptions) (*agent.ChatResponse, error) {
	r.record(msgs, opts)
	resp, err := r.ChatClient.Response(ctx, msgs, opts)
	r.fix(resp)
	return resp, err
}

func (r *recording) Stream(ctx context.Context, msgs []message.Message, opts *agent.ChatOptions) iter.Seq2[agent.Update, error] {
	r.record(msgs, opts)
	return func(yield func(agent.Update, error) bool) {
		for u, err := range r.ChatClient.Stream(ctx, msgs, opts) {
			r.fix(u.Response)
			if !yield(u, err) {
				return
			}
		}
	}
}

func (r *recording) requests() []sent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.reqs)
}

func createdWithServiceID(t *testing.T, p Provider) {
	ctx := t.Context()
	id := p.NewServiceID(t)
	a := agent.New(p.New(t), nil)
	th := must[*thread.Thread](t)(a.NewServiceThread(ctx, memDB(t), id, thread.CreateOptions{}))
	if th.Kind() != thread.KindService {
		t.Fatalf("kind %s", th.Kind())
	}
	again := must[*thread.Thread](t)(th.DB().Thread(ctx, th.ID()))
	if got, err := agent.ServiceID(ctx, again); err != nil || got != id || again.Kind() != thread.KindService {
		t.Fatalf("reloaded: %s %q %v", again.Kind(), got, err)
	}
}

func isServiceManaged(t *testing.T, p Provider) {
	ctx := t.Context()
	db := memDB(t)
	a := agent.New(p.New(t), nil)
	svc := must[*thread.Thread](t)(a.NewServiceThread(ctx, db, p.NewServiceID(t), thread.CreateOptions{}))
	local := must[*thread.Thread](t)(a.NewLocalThread(ctx, db, thread.CreateOptions{}))
	und := must[*thread.Thread](t)(a.NewThread(ctx, db, thread.CreateOptions{}))
	if !agent.IsServiceManaged(svc) || agent.IsServiceManaged(local) || agent.IsServiceManaged(und) {
		t.Fatalf("IsServiceManaged: service %v local %v undetermined %v", agent.IsServiceManaged(svc), agent.IsServiceManaged(local), agent.IsServiceManaged(und))
	}
	if svc.Kind() != thread.KindService || local.Kind() != thread.KindLocal || und.Kind() != thread.KindUndetermined {
		t.Fatalf("kinds %s %s %s", svc.Kind(), local.Kind(), und.Kind())
	}
}

func serviceIDWithLocalMessages(t *testing.T, p Provider) {
	ctx := t.Context()
	db := memDB(t)
	a := agent.New(p.New(t), nil)
	if _, err := a.NewServiceThread(ctx, db, p.NewServiceID(t), thread.CreateOptions{Messages: []message.Message{message.User("hi")}}); !errors.Is(err, thread.ErrInvalid) {
		t.Fatalf("err = %v, want ErrInvalid", err)
	}
	for th := range db.Threads(ctx, thread.ListOptions{}) {
		t.Fatalf("a thread was made: %s", th.ID())
	}
}

func runUpdatesID(t *testing.T, p Provider) {
	ctx := t.Context()
	a := agent.New(p.New(t), nil)
	th := must[*thread.Thread](t)(a.NewServiceThread(ctx, memDB(t), p.NewServiceID(t), thread.CreateOptions{}))
	res := must[*agent.Result](t)(a.Run(ctx, th, message.User("hi")))
	if res.Response == nil || res.Response.ConversationID == "" {
		t.Fatalf("the response has no conversation id: %+v", res.Response)
	}
	if id, _ := agent.ServiceID(ctx, th); id != res.Response.ConversationID {
		t.Fatalf("ServiceID %q, the response's %q", id, res.Response.ConversationID)
	}
}

func withoutConversationID(t *testing.T, p Provider) {
	ctx := t.Context()
	rec := &recording{ChatClient: p.New(t), hideID: func() bool { return true }}
	a := agent.New(rec, nil)
	id := p.NewServiceID(t)
	th := must[*thread.Thread](t)(a.NewServiceThread(ctx, memDB(t), id, thread.CreateOptions{}))
	if _, err := a.Run(ctx, th, message.User("hi")); !errors.Is(err, agent.ErrNoConversationID) {
		t.Fatalf("err = %v, want ErrNoConversationID", err)
	}
	if got := transcript(messages(t, th)); got != "user:hi" {
		t.Fatalf("thread:\n%s", got)
	}
	if got, _ := agent.ServiceID(ctx, th); got != id || th.Kind() != thread.KindService {
		t.Fatalf("kind %s id %q", th.Kind(), got)
	}
}

// told records the context provider hooks.
type told struct {
	mu  sync.Mutex
	evs []string
}

func (p *told) Name() string { return "told" }
func (p *told) Invoking(ctx context.Context, inv agent.Invocation) (*agent.Context, error) {
	p.add("invoking:" + string(inv.Thread.Kind))
	return nil, nil
}
func (p *told) ThreadCreated(ctx context.Context, info agent.ThreadInfo, state json.RawMessage) (json.RawMessage, error) {
	p.add(fmt.Sprintf("created:%s:%v", info.Kind, info.ServiceID != ""))
	return nil, nil
}
func (p *told) add(s string) { p.mu.Lock(); p.evs = append(p.evs, s); p.mu.Unlock() }

func providerToldThreadCreated(t *testing.T, p Provider) {
	ctx := t.Context()
	pr := &told{}
	a := agent.New(p.New(t), &agent.Options{Providers: []agent.ContextProvider{pr}})
	db := memDB(t)
	must[*thread.Thread](t)(a.NewServiceThread(ctx, db, p.NewServiceID(t), thread.CreateOptions{}))
	und := must[*thread.Thread](t)(a.NewThread(ctx, db, thread.CreateOptions{}))
	must[*agent.Result](t)(a.Run(ctx, und, message.User("hello")))
	want := []string{"created:service:true", "created:undetermined:false", "invoking:undetermined", "created:service:true"}
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if !slices.Equal(pr.evs, want) {
		t.Fatalf("hooks %q, want %q", pr.evs, want)
	}
}

func conversationIDPassed(t *testing.T, p Provider) {
	ctx := t.Context()
	rec := &recording{ChatClient: p.New(t)}
	a := agent.New(rec, nil)
	id := p.NewServiceID(t)
	th := must[*thread.Thread](t)(a.NewServiceThread(ctx, memDB(t), id, thread.CreateOptions{}))
	must[*agent.Result](t)(a.Run(ctx, th, message.User("hi")))
	req := rec.requests()[0]
	if req.conversation != id || req.store == nil || !*req.store {
		t.Fatalf("conversation %q store %v", req.conversation, req.store)
	}
	if got := transcript(req.msgs); got != "user:hi" {
		t.Fatalf("sent:\n%s", got)
	}
}

func becomesService(t *testing.T, p Provider) {
	ctx := t.Context()
	rec := &recording{ChatClient: p.New(t)}
	a := agent.New(rec, nil)
	th := must[*thread.Thread](t)(a.NewThread(ctx, memDB(t), thread.CreateOptions{}))
	res := must[*agent.Result](t)(a.Run(ctx, th, message.User("hi")))
	if th.Kind() != thread.KindService {
		t.Fatalf("kind %s", th.Kind())
	}
	if id, _ := agent.ServiceID(ctx, th); id == "" || id != res.Response.ConversationID {
		t.Fatalf("ServiceID %q", id)
	}
	if req := rec.requests()[0]; req.store != nil || req.conversation != "" {
		t.Fatalf("first request: store %v conversation %q", req.store, req.conversation)
	}
	msgs := messages(t, th)
	if len(msgs) != 2 || msgs[0].Text() != "hi" || msgs[1].Role != message.RoleAssistant || msgs[1].Text() == "" {
		t.Fatalf("mirror:\n%s", transcript(msgs))
	}
}

func becomesLocal(t *testing.T, p Provider) {
	ctx := t.Context()
	rec := &recording{ChatClient: p.New(t), local: true}
	a := agent.New(rec, nil)
	th := must[*thread.Thread](t)(a.NewThread(ctx, memDB(t), thread.CreateOptions{}))
	must[*agent.Result](t)(a.Run(ctx, th, message.User("hi")))
	if th.Kind() != thread.KindLocal {
		t.Fatalf("kind %s", th.Kind())
	}
	must[*agent.Result](t)(a.Run(ctx, th, message.User("more")))
	req := rec.requests()[1]
	if got := transcript(req.msgs); !strings.HasPrefix(got, "user:hi\nassistant:") || !strings.HasSuffix(got, "\nuser:more") {
		t.Fatalf("second request:\n%s", got)
	}
	if req.store == nil || *req.store {
		t.Fatalf("store %v, want false", req.store)
	}
}

func subsequentRuns(t *testing.T, p Provider) {
	ctx := t.Context()
	rec := &recording{ChatClient: p.New(t)}
	a := agent.New(rec, nil)
	th := must[*thread.Thread](t)(a.NewThread(ctx, memDB(t), thread.CreateOptions{}))
	var ids []string
	for _, in := range []string{"a", "b", "c"} {
		res := must[*agent.Result](t)(a.Run(ctx, th, message.User(in)))
		ids = append(ids, res.Response.ConversationID)
	}
	reqs := rec.requests()
	for i, want := range []string{"", ids[0], ids[1]} {
		if reqs[i].conversation != want {
			t.Fatalf("request %d conversation %q, want %q", i, reqs[i].conversation, want)
		}
	}
	if got := transcript(reqs[2].msgs); got != "user:c" {
		t.Fatalf("third request sent:\n%s", got)
	}
}

func kindDoesNotChange(t *testing.T, p Provider) {
	ctx := t.Context()
	first := true
	rec := &recording{ChatClient: p.New(t), hideID: func() bool { f := first; first = false; return f }}
	a := agent.New(rec, nil)
	th := must[*thread.Thread](t)(a.NewThread(ctx, memDB(t), thread.CreateOptions{}))
	for _, in := range []string{"a", "b"} {
		must[*agent.Result](t)(a.Run(ctx, th, message.User(in)))
	}
	if th.Kind() != thread.KindLocal {
		t.Fatalf("kind %s, want local", th.Kind())
	}
	if id, _ := agent.ServiceID(ctx, th); id != "" {
		t.Fatalf("a local thread got service id %q", id)
	}
	if _, err := th.Commit(ctx, thread.CommitOptions{Messages: []message.Message{message.User("x")}, Kind: thread.KindService}); !errors.Is(err, thread.ErrInvalid) {
		t.Fatalf("kind change: %v", err)
	}
}
