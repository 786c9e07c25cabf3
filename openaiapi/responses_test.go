package openaiapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"iter"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/loomthreads/loom/agent"
	"github.com/loomthreads/loom/agent/scripted"
	"github.com/loomthreads/loom/httpapi"
	"github.com/loomthreads/loom/internal/auth"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/openaiapi"
	"github.com/loomthreads/loom/sqlite"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/store"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/conversations"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
)

// The keys of the two tenants of a respServer.
const (
	respKeyA = "sk-tenant-a-0123456789"
	respKeyB = "sk-tenant-b-0123456789"
)

// respServer is loom's OpenAI-compatible API as loom serve mounts it —
// loom's middleware (keys, tenants, limits), OpenAI's error shape, the
// API — on an httptest server, answered by scripted.Echo, which records
// what it is sent.
type respServer struct {
	db    *thread.DB // the whole store; tenants are "a" and "b"
	model *scripted.Client
	url   string // the base URL an SDK is given
	a, b  openai.Client
}

// respStores are the stores every test runs on.
var respStores = []struct {
	name string
	open func(t *testing.T) store.Store
}{
	{"memory", func(t *testing.T) store.Store { return thread.NewMemoryStore() }},
	{"sqlite", func(t *testing.T) store.Store {
		st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "loom.db"), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}},
}

// eachStore runs fn on a fresh server over each store.
func eachStore(t *testing.T, fn func(t *testing.T, s *respServer)) {
	for _, st := range respStores {
		t.Run(st.name, func(t *testing.T) {
			model := scripted.Echo()
			model.Record = true
			fn(t, newRespServer(t, st.open(t), model))
		})
	}
}

func newRespServer(t *testing.T, store store.Store, model agent.ChatClient) *respServer {
	t.Helper()
	return serveResponses(t, store, model, true)
}

// serveResponses is newRespServer, with or without keys: without, any
// key is taken, as loom serve takes them on loopback.
func serveResponses(t *testing.T, store store.Store, model agent.ChatClient, withKeys bool) *respServer {
	t.Helper()
	db := thread.New(store, nil)
	var keys *auth.Keys
	if withKeys {
		keys = new(auth.Keys)
		for key, tenant := range map[string]string{respKeyA: "a", respKeyB: "b"} {
			if err := keys.Add(key, tenant); err != nil {
				t.Fatal(err)
			}
		}
	}
	quiet := slog.New(slog.DiscardHandler)
	api := httpapi.New(httpapi.Options{DB: db, Keys: keys, Chat: model, MaxBodyBytes: 1 << 20, Logger: quiet})
	mux := http.NewServeMux()
	mux.Handle("/", api)
	mux.Handle(openaiapi.Prefix+"/", openaiapi.Errors(api.Protect(openaiapi.New(openaiapi.Options{DB: db, Chat: model, Model: "scripted", Logger: quiet}))))
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	t.Cleanup(func() { api.Close() })
	s := &respServer{db: db, url: ts.URL + openaiapi.Prefix}
	s.model, _ = model.(*scripted.Client)
	s.a = openai.NewClient(option.WithBaseURL(s.url), option.WithAPIKey(respKeyA), option.WithMaxRetries(0))
	s.b = openai.NewClient(option.WithBaseURL(s.url), option.WithAPIKey(respKeyB), option.WithMaxRetries(0))
	return s
}

// conversation makes an empty conversation of tenant a, through the SDK.
func (s *respServer) conversation(t *testing.T) string {
	t.Helper()
	c, err := s.a.Conversations.New(t.Context(), conversations.ConversationNewParams{})
	if err != nil {
		t.Fatal(err)
	}
	return c.ID
}

// messages reads a thread of tenant a.
func (s *respServer) messages(t *testing.T, id string) []message.Message {
	t.Helper()
	th, err := s.db.WithTenant("a").Thread(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := th.Messages(t.Context(), thread.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return msgs
}

// sent is the transcript of the model's last request.
func (s *respServer) sent(t *testing.T) string {
	t.Helper()
	reqs := s.model.Requests()
	if len(reqs) == 0 {
		t.Fatal("the model got no request")
	}
	return reqs[len(reqs)-1].Transcript()
}

// threads lists every thread id of the store, of every tenant.
func (s *respServer) threads(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, tenant := range []string{"a", "b", ""} {
		for th, err := range s.db.WithTenant(tenant).Threads(t.Context(), thread.ListOptions{}) {
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, tenant+"/"+th.ID()+"@"+itoa(th.Version()))
		}
	}
	slices.Sort(out)
	return out
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }

func text(s string) responses.ResponseNewParamsInputUnion {
	return responses.ResponseNewParamsInputUnion{OfString: openai.String(s)}
}

func inConversation(id string) responses.ResponseNewParamsConversationUnion {
	return responses.ResponseNewParamsConversationUnion{OfString: openai.String(id)}
}

func weatherTool() []responses.ToolUnionParam {
	return []responses.ToolUnionParam{{OfFunction: &responses.FunctionToolParam{
		Name: "weather", Description: openai.String("the weather in a city"), Strict: openai.Bool(false),
		Parameters: map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}},
	}}}
}

// transcript is role: text per message, as the model's requests show them.
func transcript(msgs []message.Message) string {
	var b strings.Builder
	for _, m := range msgs {
		b.WriteString(string(m.Role) + ": " + m.Text() + "\n")
	}
	return b.String()
}

// apiError is the OpenAI error err carries, failing the test if none.
func oaiError(t *testing.T, err error) *openai.Error {
	t.Helper()
	var e *openai.Error
	if !errors.As(err, &e) {
		t.Fatalf("want an API error, got %v", err)
	}
	return e
}

func TestResponseInConversation(t *testing.T) {
	eachStore(t, func(t *testing.T, s *respServer) {
		ctx := t.Context()
		conv := s.conversation(t)

		// Non-streamed.
		r1, err := s.a.Responses.New(ctx, responses.ResponseNewParams{Model: "gpt-test", Input: text("hello"), Conversation: inConversation(conv)})
		if err != nil {
			t.Fatal(err)
		}
		if r1.OutputText() != "You said: hello" || r1.Status != responses.ResponseStatusCompleted || r1.Model != "gpt-test" ||
			r1.Conversation.ID != conv || !strings.HasPrefix(r1.ID, "resp_") || !strings.HasSuffix(r1.ID, "_"+conv) ||
			r1.Usage.OutputTokens != 3 || r1.Usage.TotalTokens != r1.Usage.InputTokens+3 || len(r1.Output) != 1 ||
			!strings.HasPrefix(r1.Output[0].ID, "msg_") || r1.Object != "response" {
			t.Fatalf("response: %s", r1.RawJSON())
		}

		// Streamed, through the SDK's stream.
		stream := s.a.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: "gpt-test", Input: text("tell me a longer thing"), Conversation: inConversation(conv)})
		var types []string
		var deltas []string
		var seq []int64
		var completed responses.Response
		for stream.Next() {
			ev := stream.Current()
			types = append(types, ev.Type)
			seq = append(seq, ev.SequenceNumber)
			switch ev.Type {
			case "response.output_text.delta":
				deltas = append(deltas, ev.Delta)
			case "response.completed":
				completed = ev.Response
				// Answered is durable: the commit was made before.
				if _, err := s.a.Responses.Get(ctx, completed.ID, responses.ResponseGetParams{}); err != nil {
					t.Fatalf("get on response.completed: %v", err)
				}
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		want := "You said: tell me a longer thing"
		if strings.Join(deltas, "") != want || len(deltas) < 3 {
			t.Fatalf("deltas %q", deltas)
		}
		for i, n := range seq {
			if n != int64(i) {
				t.Fatalf("sequence numbers %v", seq)
			}
		}
		wantTypes := []string{"response.created", "response.in_progress", "response.output_item.added", "response.content_part.added"}
		for range deltas {
			wantTypes = append(wantTypes, "response.output_text.delta")
		}
		wantTypes = append(wantTypes, "response.output_text.done", "response.content_part.done", "response.output_item.done", "response.completed")
		if !slices.Equal(types, wantTypes) {
			t.Fatalf("events\n%q\nwant\n%q", types, wantTypes)
		}
		if completed.OutputText() != want || !strings.HasSuffix(completed.ID, "_"+conv) || completed.Status != "completed" {
			t.Fatalf("completed: %s", completed.RawJSON())
		}

		// The model saw the conversation; the conversation holds input then
		// output of each response.
		if got := s.sent(t); got != "user: hello\nassistant: You said: hello\nuser: tell me a longer thing\n" {
			t.Fatalf("the model was sent:\n%s", got)
		}
		msgs := s.messages(t, conv)
		if got := transcript(msgs); got != "user: hello\nassistant: You said: hello\nuser: tell me a longer thing\nassistant: "+want+"\n" {
			t.Fatalf("conversation:\n%s", got)
		}
		if msgs[1].ID != r1.Output[0].ID || msgs[3].ID != completed.Output[0].ID {
			t.Fatalf("item ids %s %s, messages %s %s", r1.Output[0].ID, completed.Output[0].ID, msgs[1].ID, msgs[3].ID)
		}
		// As the SDK reads the conversation: input then output, twice.
		items, err := s.a.Conversations.Items.List(ctx, conv, conversations.ItemListParams{Order: conversations.ItemListParamsOrderAsc})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, it := range items.Data {
			m := it.AsMessage()
			got = append(got, it.ID+" "+string(m.Role)+" "+m.Content[0].Text)
		}
		wantItems := []string{msgs[0].ID + " user hello", r1.Output[0].ID + " assistant You said: hello",
			msgs[2].ID + " user tell me a longer thing", completed.Output[0].ID + " assistant " + want}
		if !slices.Equal(got, wantItems) {
			t.Fatalf("items\n%q\nwant\n%q", got, wantItems)
		}

		// Both are stored, and read back as they were answered.
		for _, r := range []*responses.Response{r1, &completed} {
			got, err := s.a.Responses.Get(ctx, r.ID, responses.ResponseGetParams{})
			if err != nil {
				t.Fatal(err)
			}
			if got.ID != r.ID || got.OutputText() != r.OutputText() || got.Output[0].ID != r.Output[0].ID || got.Usage.TotalTokens != r.Usage.TotalTokens || got.Model != "gpt-test" {
				t.Fatalf("stored %s\nanswered %s", got.RawJSON(), r.RawJSON())
			}
		}
	})
}

func TestFunctionCallRoundTrip(t *testing.T) {
	eachStore(t, func(t *testing.T, s *respServer) {
		ctx := t.Context()
		r1, err := s.a.Responses.New(ctx, responses.ResponseNewParams{Model: "m", Input: text(`call weather {"city":"Paris"}`), Tools: weatherTool()})
		if err != nil {
			t.Fatal(err)
		}
		if len(r1.Output) != 1 || r1.Output[0].Type != "function_call" {
			t.Fatalf("output: %s", r1.RawJSON())
		}
		fc := r1.Output[0].AsFunctionCall()
		if fc.Name != "weather" || fc.Arguments != `{"city":"Paris"}` || !strings.HasPrefix(fc.CallID, "call_") || !strings.HasPrefix(fc.ID, "fc_") {
			t.Fatalf("call: %s", r1.RawJSON())
		}
		if reqs := s.model.Requests(); len(reqs[0].Options.Tools) != 1 || reqs[0].Options.Tools[0].Name != "weather" || !strings.Contains(string(reqs[0].Options.Tools[0].Parameters), `"city"`) {
			t.Fatalf("tools sent: %+v", reqs[0].Options.Tools)
		}

		// The client runs the tool and sends its output back.
		r2, err := s.a.Responses.New(ctx, responses.ResponseNewParams{Model: "m", PreviousResponseID: openai.String(r1.ID), Tools: weatherTool(),
			Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
				callOutput(fc.CallID, "21 °C"),
			}}})
		if err != nil {
			t.Fatal(err)
		}
		if r2.OutputText() != "Tool weather returned: 21 °C" || r2.PreviousResponseID != r1.ID {
			t.Fatalf("second: %s", r2.RawJSON())
		}
		// The head was r1: the same thread goes on.
		_, th1, _ := strings.Cut(r1.ID[len("resp_"):], "_")
		_, th2, _ := strings.Cut(r2.ID[len("resp_"):], "_")
		if th1 != th2 {
			t.Fatalf("threads %s and %s", th1, th2)
		}
		msgs := s.messages(t, th1)
		if len(msgs) != 4 || msgs[1].Calls()[0].CallID != fc.CallID || msgs[2].Role != message.RoleTool || msgs[2].Results()[0].Result != "21 °C" {
			t.Fatalf("thread:\n%s", transcript(msgs))
		}
		items, err := s.a.Responses.InputItems.List(ctx, r2.ID, responses.InputItemListParams{})
		if err != nil {
			t.Fatal(err)
		}
		if len(items.Data) != 1 || items.Data[0].Type != "function_call_output" || items.Data[0].CallID != fc.CallID {
			t.Fatalf("input items: %s", items.RawJSON())
		}
	})
}

// A response continued from an earlier one, when the line has gone on
// since, is a branch: a loom fork at that response, with that context.
func TestPreviousResponseBranch(t *testing.T) {
	eachStore(t, func(t *testing.T, s *respServer) {
		ctx := t.Context()
		ask := func(prev, in string) *responses.Response {
			t.Helper()
			p := responses.ResponseNewParams{Model: "m", Input: text(in)}
			if prev != "" {
				p.PreviousResponseID = openai.String(prev)
			}
			r, err := s.a.Responses.New(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			return r
		}
		r1 := ask("", "one")
		r2 := ask(r1.ID, "two")
		r3 := ask(r2.ID, "three")
		if threadOf(r1.ID) != threadOf(r3.ID) {
			t.Fatalf("the head chain left its thread: %s %s", r1.ID, r3.ID)
		}
		if got := s.sent(t); got != "user: one\nassistant: You said: one\nuser: two\nassistant: You said: two\nuser: three\n" {
			t.Fatalf("head chain sent:\n%s", got)
		}

		// From r1 again: a branch.
		b := ask(r1.ID, "other")
		if got := s.sent(t); got != "user: one\nassistant: You said: one\nuser: other\n" {
			t.Fatalf("branch sent:\n%s", got)
		}
		fork := threadOf(b.ID)
		if fork == threadOf(r1.ID) {
			t.Fatalf("the branch is on the source thread: %s", b.ID)
		}
		root, family, err := s.db.WithTenant("a").Family(ctx, fork)
		if err != nil {
			t.Fatal(err)
		}
		if root != threadOf(r1.ID) || len(family) != 2 {
			t.Fatalf("family of %s: root %s, %d threads", fork, root, len(family))
		}
		th, err := s.db.WithTenant("a").Thread(ctx, fork)
		if err != nil {
			t.Fatal(err)
		}
		if ff := th.Record().ForkedFrom; ff.Thread != threadOf(r1.ID) || ff.Commit == "" {
			t.Fatalf("forked from %+v", ff)
		}
		if got := transcript(s.messages(t, fork)); got != "user: one\nassistant: You said: one\nuser: other\nassistant: You said: other\n" {
			t.Fatalf("branch thread:\n%s", got)
		}

		// Both lines go on with their own context.
		ask(r3.ID, "four")
		if got := s.sent(t); !strings.HasSuffix(got, "user: three\nassistant: You said: three\nuser: four\n") || strings.Contains(got, "other") {
			t.Fatalf("head chain sent:\n%s", got)
		}
		b2 := ask(b.ID, "more")
		if got := s.sent(t); got != "user: one\nassistant: You said: one\nuser: other\nassistant: You said: other\nuser: more\n" {
			t.Fatalf("branch sent:\n%s", got)
		}
		if threadOf(b2.ID) != fork {
			t.Fatalf("the branch's head went to %s", b2.ID)
		}
		// The source thread was not touched by the branch.
		if got := transcript(s.messages(t, threadOf(r1.ID))); strings.Contains(got, "other") || !strings.HasSuffix(got, "You said: four\n") {
			t.Fatalf("source:\n%s", got)
		}
	})
}

func TestGetDeleteInputItems(t *testing.T) {
	eachStore(t, func(t *testing.T, s *respServer) {
		ctx := t.Context()
		var input responses.ResponseInputParam
		for _, w := range []string{"a", "b", "c", "d", "e"} {
			input = append(input, responses.ResponseInputItemParamOfMessage(w, responses.EasyInputMessageRoleUser))
		}
		r, err := s.a.Responses.New(ctx, responses.ResponseNewParams{Model: "m", Input: responses.ResponseNewParamsInputUnion{OfInputItemList: input},
			Instructions: openai.String("be brief"), Metadata: map[string]string{"k": "v"}})
		if err != nil {
			t.Fatal(err)
		}
		if r.Instructions.OfString != "be brief" || r.Metadata["k"] != "v" || s.model.Requests()[0].Options.Instructions != "be brief" {
			t.Fatalf("response: %s", r.RawJSON())
		}
		// Pages of input items, newest first by default.
		var got []string
		for it := range pages(t, s, r.ID, responses.InputItemListParams{Limit: openai.Int(2)}) {
			got = append(got, it)
		}
		if strings.Join(got, "") != "edcba" {
			t.Fatalf("desc pages: %q", got)
		}
		got = nil
		for it := range pages(t, s, r.ID, responses.InputItemListParams{Limit: openai.Int(3), Order: responses.InputItemListParamsOrderAsc}) {
			got = append(got, it)
		}
		if strings.Join(got, "") != "abcde" {
			t.Fatalf("asc pages: %q", got)
		}

		// Cancel is refused: loom runs no background responses.
		if _, err := s.a.Responses.Cancel(ctx, r.ID); oaiError(t, err).StatusCode != 400 {
			t.Fatalf("cancel: %v", err)
		}
		// Delete drops the response; its messages stay in the thread.
		if err := s.a.Responses.Delete(ctx, r.ID); err != nil {
			t.Fatal(err)
		}
		for _, err := range []error{
			func() error { _, err := s.a.Responses.Get(ctx, r.ID, responses.ResponseGetParams{}); return err }(),
			s.a.Responses.Delete(ctx, r.ID),
			func() error {
				_, err := s.a.Responses.New(ctx, responses.ResponseNewParams{Model: "m", Input: text("x"), PreviousResponseID: openai.String(r.ID)})
				return err
			}(),
		} {
			if e := oaiError(t, err); e.StatusCode != 404 || !strings.Contains(e.Message, r.ID) {
				t.Fatalf("after delete: %v", err)
			}
		}
		if got := transcript(s.messages(t, threadOf(r.ID))); got != "user: a\nuser: b\nuser: c\nuser: d\nuser: e\nassistant: You said: e\n" {
			t.Fatalf("thread:\n%s", got)
		}
	})
}

// pages yields the texts of a response's input items, page by page as
// the SDK asks for them.
func pages(t *testing.T, s *respServer, id string, q responses.InputItemListParams) func(func(string) bool) {
	return func(yield func(string) bool) {
		pager := s.a.Responses.InputItems.ListAutoPaging(t.Context(), id, q)
		for pager.Next() {
			it := pager.Current()
			if !yield(it.AsMessage().Content[0].Text) {
				return
			}
		}
		if err := pager.Err(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestStoreFalse(t *testing.T) {
	eachStore(t, func(t *testing.T, s *respServer) {
		ctx := t.Context()
		conv := s.conversation(t)
		before := s.threads(t)
		r, err := s.a.Responses.New(ctx, responses.ResponseNewParams{Model: "m", Input: text("hi"), Store: openai.Bool(false)})
		if err != nil {
			t.Fatal(err)
		}
		if r.OutputText() != "You said: hi" || !strings.Contains(r.RawJSON(), `"store":false`) {
			t.Fatalf("response: %s", r.RawJSON())
		}
		if after := s.threads(t); !slices.Equal(before, after) {
			t.Fatalf("threads %v, then %v", before, after)
		}
		if _, err := s.a.Responses.Get(ctx, r.ID, responses.ResponseGetParams{}); oaiError(t, err).StatusCode != 404 {
			t.Fatalf("get: %v", err)
		}
		// With a conversation, the items are appended, and no response is
		// kept.
		r, err = s.a.Responses.New(ctx, responses.ResponseNewParams{Model: "m", Input: text("hi"), Store: openai.Bool(false), Conversation: inConversation(conv)})
		if err != nil {
			t.Fatal(err)
		}
		if got := transcript(s.messages(t, conv)); got != "user: hi\nassistant: You said: hi\n" {
			t.Fatalf("conversation:\n%s", got)
		}
		if _, err := s.a.Responses.Get(ctx, r.ID, responses.ResponseGetParams{}); oaiError(t, err).StatusCode != 404 {
			t.Fatalf("get: %v", err)
		}
	})
}

// What loom refuses is refused before the model runs, and changes
// nothing.
func TestRefusals(t *testing.T) {
	eachStore(t, func(t *testing.T, s *respServer) {
		ctx := t.Context()
		conv := s.conversation(t)
		r, err := s.a.Responses.New(ctx, responses.ResponseNewParams{Model: "m", Input: text("hi")})
		if err != nil {
			t.Fatal(err)
		}
		svc, err := s.db.WithTenant("a").Create(ctx, thread.CreateOptions{Kind: thread.KindService})
		if err != nil {
			t.Fatal(err)
		}
		before := s.threads(t)
		calls := len(s.model.Requests())
		for _, tc := range []struct {
			name   string
			params responses.ResponseNewParams
			opts   []option.RequestOption
			param  string
			says   string
		}{
			{name: "web search", params: responses.ResponseNewParams{Model: "m", Input: text("hi"),
				Tools: []responses.ToolUnionParam{{OfWebSearch: &responses.WebSearchToolParam{Type: responses.WebSearchToolTypeWebSearch}}}},
				param: "tools[0].type", says: "loom does not support hosted tools"},
			{name: "background", params: responses.ResponseNewParams{Model: "m", Input: text("hi"), Background: openai.Bool(true)},
				param: "background", says: "loom does not support background"},
			{name: "conversation and previous", params: responses.ResponseNewParams{Model: "m", Input: text("hi"), Conversation: inConversation(conv), PreviousResponseID: openai.String(r.ID)},
				param: "previous_response_id", says: "cannot be used together"},
			{name: "unknown parameter", params: responses.ResponseNewParams{Model: "m", Input: text("hi")}, opts: []option.RequestOption{option.WithJSONSet("frobnicate", 1)},
				param: "frobnicate", says: "Unknown parameter: 'frobnicate'"},
			{name: "unknown conversation", params: responses.ResponseNewParams{Model: "m", Input: text("hi"), Conversation: inConversation("conv_nope")},
				says: "Conversation with id 'conv_nope' not found"},
			{name: "item reference", params: responses.ResponseNewParams{Model: "m", Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
				{OfItemReference: &responses.ResponseInputItemItemReferenceParam{ID: "msg_x"}}}}},
				param: "input[0]", says: "loom does not support item references"},
			{name: "bad item", params: responses.ResponseNewParams{Model: "m", Input: text("hi")}, opts: []option.RequestOption{option.WithJSONSet("input", []any{map[string]any{"type": "message", "role": "user", "content": 7}})},
				param: "input[0].content", says: "input[0].content"},
			{name: "top logprobs", params: responses.ResponseNewParams{Model: "m", Input: text("hi"), TopLogprobs: openai.Int(3)}, param: "top_logprobs", says: "loom does not support"},
			{name: "tool choice not offered", params: responses.ResponseNewParams{Model: "m", Input: text("hi"), Tools: weatherTool(),
				ToolChoice: responses.ResponseNewParamsToolChoiceUnion{OfFunctionTool: &responses.ToolChoiceFunctionParam{Name: "nope"}}}, param: "tool_choice"},
			{name: "no input", params: responses.ResponseNewParams{Model: "m"}, param: "input"},
			{name: "tool choice required without tools", params: responses.ResponseNewParams{Model: "m", Input: text("hi"),
				ToolChoice: responses.ResponseNewParamsToolChoiceUnion{OfToolChoiceMode: openai.Opt(responses.ToolChoiceOptionsRequired)}}, param: "tool_choice", says: "must be specified with 'tools'"},
			{name: "service thread", params: responses.ResponseNewParams{Model: "m", Input: text("hi"), Conversation: inConversation(svc.ID())},
				param: "conversation", says: "service-managed"},
			{name: "input id already in the conversation", params: responses.ResponseNewParams{Model: "m", Input: text("hi"), PreviousResponseID: openai.String(r.ID)},
				opts:  []option.RequestOption{option.WithJSONSet("input", []any{map[string]any{"role": "user", "content": "again", "id": r.Output[0].ID}})},
				param: "input[0].id", says: "already in the conversation"},
			{name: "json schema without a schema", params: responses.ResponseNewParams{Model: "m", Input: text("hi")},
				opts: []option.RequestOption{option.WithJSONSet("text", map[string]any{"format": map[string]any{"type": "json_schema", "name": "x"}})}, param: "text.format.schema"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				_, err := s.a.Responses.New(ctx, tc.params, tc.opts...)
				e := oaiError(t, err)
				if e.StatusCode/100 != 4 || e.Type != "invalid_request_error" || e.Param != tc.param || !strings.Contains(e.Message, tc.says) {
					t.Fatalf("%d %s", e.StatusCode, e.RawJSON())
				}
			})
		}
		// The Responses API's endpoints loom lacks say so.
		for _, path := range []string{"responses/compact", "responses/input_tokens"} {
			var out map[string]any
			err := s.a.Post(ctx, path, map[string]any{"model": "m", "input": "hi"}, &out)
			if e := oaiError(t, err); e.StatusCode != 400 || !strings.Contains(e.Message, "loom does not support") {
				t.Fatalf("%s: %v", path, err)
			}
		}
		if _, err := s.a.Responses.Get(ctx, r.ID, responses.ResponseGetParams{}, option.WithQuery("stream", "true")); oaiError(t, err).StatusCode != 400 {
			t.Fatalf("get as a stream: %v", err)
		}
		if after := s.threads(t); !slices.Equal(before, after) {
			t.Fatalf("threads %v, then %v", before, after)
		}
		if n := len(s.model.Requests()); n != calls {
			t.Fatalf("the model ran %d times", n-calls)
		}
	})
}

func TestTenantsIsolated(t *testing.T) {
	eachStore(t, func(t *testing.T, s *respServer) {
		ctx := t.Context()
		r, err := s.a.Responses.New(ctx, responses.ResponseNewParams{Model: "m", Input: text("secret")})
		if err != nil {
			t.Fatal(err)
		}
		for name, err := range map[string]error{
			"get":    func() error { _, err := s.b.Responses.Get(ctx, r.ID, responses.ResponseGetParams{}); return err }(),
			"delete": s.b.Responses.Delete(ctx, r.ID),
			"items": func() error {
				_, err := s.b.Responses.InputItems.List(ctx, r.ID, responses.InputItemListParams{})
				return err
			}(),
			"continue": func() error {
				_, err := s.b.Responses.New(ctx, responses.ResponseNewParams{Model: "m", Input: text("x"), PreviousResponseID: openai.String(r.ID)})
				return err
			}(),
			"conversation": func() error {
				_, err := s.b.Responses.New(ctx, responses.ResponseNewParams{Model: "m", Input: text("x"), Conversation: inConversation(threadOf(r.ID))})
				return err
			}(),
		} {
			if e := oaiError(t, err); e.StatusCode != 404 {
				t.Fatalf("%s: %v", name, err)
			}
		}
		if strings.Contains(s.sent(t), "x") {
			t.Fatalf("the model was sent:\n%s", s.sent(t))
		}
		if _, err := s.a.Responses.Get(ctx, r.ID, responses.ResponseGetParams{}); err != nil {
			t.Fatal(err)
		}
		// No key: OpenAI's 401.
		anon := openai.NewClient(option.WithBaseURL(s.url), option.WithAPIKey("wrong"), option.WithMaxRetries(0))
		if _, err := anon.Responses.Get(ctx, r.ID, responses.ResponseGetParams{}); oaiError(t, err).StatusCode != 401 || oaiError(t, err).Code != "invalid_api_key" {
			t.Fatalf("no key: %v", err)
		}
	})
}

func TestModelFailureWritesNothing(t *testing.T) {
	for _, st := range respStores {
		t.Run(st.name, func(t *testing.T) {
			ctx := t.Context()
			model := scripted.New(scripted.Fail(errors.New("the model is down")), scripted.Step{Text: "partial text then", Err: errors.New("cut")})
			s := newRespServer(t, st.open(t), model)
			conv := s.conversation(t)
			before := s.threads(t)
			_, err := s.a.Responses.New(ctx, responses.ResponseNewParams{Model: "m", Input: text("hi"), Conversation: inConversation(conv)})
			if e := oaiError(t, err); e.StatusCode != 502 || e.Type != "server_error" || strings.Contains(e.Message, "down") {
				t.Fatalf("%v", err)
			}
			stream := s.a.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: "m", Input: text("hi"), Conversation: inConversation(conv)})
			var types []string
			var failed responses.Response
			for stream.Next() {
				ev := stream.Current()
				types = append(types, ev.Type)
				if ev.Type == "response.failed" {
					failed = ev.Response
				}
			}
			// The stream ends with response.failed and an error event
			// (which openai-go passes on as an event; other SDKs raise it).
			if n := len(types); stream.Err() != nil || !slices.Contains(types, "response.output_text.delta") || n < 2 || types[n-2] != "response.failed" || types[n-1] != "error" ||
				failed.Status != "failed" || failed.Error.Message == "" || len(failed.Output) != 0 {
				t.Fatalf("events %q, err %v, failed %s", types, stream.Err(), failed.RawJSON())
			}
			if after := s.threads(t); !slices.Equal(before, after) {
				t.Fatalf("threads %v, then %v", before, after)
			}
		})
	}
}

// Concurrent responses in one conversation all land: each one's input
// and output, none lost.
func TestConcurrentResponsesInConversation(t *testing.T) {
	eachStore(t, func(t *testing.T, s *respServer) {
		conv := s.conversation(t)
		const n = 32
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for i := range n {
			wg.Go(func() {
				_, err := s.a.Responses.New(t.Context(), responses.ResponseNewParams{Model: "m", Input: text("msg " + itoa(int64(i))), Conversation: inConversation(conv)})
				errs <- err
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		msgs := s.messages(t, conv)
		if len(msgs) != 2*n {
			t.Fatalf("%d messages:\n%s", len(msgs), transcript(msgs))
		}
		for i := 0; i < len(msgs); i += 2 {
			if msgs[i].Role != message.RoleUser || msgs[i+1].Text() != "You said: "+msgs[i].Text() {
				t.Fatalf("conversation:\n%s", transcript(msgs))
			}
		}
		th, _ := s.db.WithTenant("a").Thread(t.Context(), conv)
		cps := 0
		for _, err := range th.Checkpoints(t.Context()) {
			if err != nil {
				t.Fatal(err)
			}
			cps++
		}
		if cps != n {
			t.Fatalf("%d checkpoints", cps)
		}
	})
}

// A raw stream: events as the wire has them, for what the SDK does not
// check (event names, JSON members).
func TestStreamWire(t *testing.T) {
	model := scripted.Echo()
	s := newRespServer(t, thread.NewMemoryStore(), model)
	body := `{"model":"m","input":"call weather {\"city\":\"Oslo\"}","stream":true,"tools":[{"type":"function","name":"weather","parameters":{"type":"object"}}]}`
	req, _ := http.NewRequestWithContext(context.Background(), "POST", s.url+"/responses", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+respKeyA)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("%d %s", resp.StatusCode, data)
	}
	var names []string
	for _, block := range strings.Split(strings.TrimSpace(string(data)), "\n\n") {
		ev, rest, _ := strings.Cut(block, "\n")
		name := strings.TrimPrefix(ev, "event: ")
		var obj map[string]any
		if err := json.Unmarshal([]byte(strings.TrimPrefix(rest, "data: ")), &obj); err != nil || obj["type"] != name {
			t.Fatalf("event %q: %v", block, err)
		}
		names = append(names, name)
		if name == "response.output_item.added" {
			item := obj["item"].(map[string]any)
			if item["type"] != "function_call" || item["arguments"] != "" || item["name"] != "weather" {
				t.Fatalf("added %v", item)
			}
		}
		if name == "response.function_call_arguments.done" && obj["arguments"] != `{"city":"Oslo"}` {
			t.Fatalf("done %v", obj)
		}
	}
	want := []string{"response.created", "response.in_progress", "response.output_item.added", "response.function_call_arguments.delta",
		"response.function_call_arguments.done", "response.output_item.done", "response.completed"}
	if !slices.Equal(names, want) || strings.Contains(string(data), "[DONE]") {
		t.Fatalf("events %q", names)
	}
}

// callOutput is a function_call_output input item.
func callOutput(callID, output string) responses.ResponseInputItemUnionParam {
	it := responses.ResponseInputItemParamOfFunctionCallOutput(output)
	it.OfFunctionCallOutput.CallID = openai.String(callID)
	return it
}

// gated answers as its client does, but holds a request whose last
// message says "slow" until release is closed.
type gated struct {
	agent.ChatClient
	started chan struct{}
	release chan struct{}
}

func (g *gated) Response(ctx context.Context, msgs []message.Message, opts *agent.ChatOptions) (*agent.ChatResponse, error) {
	if len(msgs) > 0 && msgs[len(msgs)-1].Text() == "slow" {
		g.started <- struct{}{}
		select {
		case <-g.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return g.ChatClient.Response(ctx, msgs, opts)
}

func (g *gated) Stream(ctx context.Context, msgs []message.Message, opts *agent.ChatOptions) iter.Seq2[agent.Update, error] {
	return func(yield func(agent.Update, error) bool) {
		if len(msgs) > 0 && msgs[len(msgs)-1].Text() == "slow" {
			g.started <- struct{}{}
			select {
			case <-g.release:
			case <-ctx.Done():
				yield(agent.Update{}, ctx.Err())
				return
			}
		}
		for u, err := range g.ChatClient.Stream(ctx, msgs, opts) {
			if !yield(u, err) {
				return
			}
		}
	}
}

// Two responses continue one head at once: the first to commit goes on
// the thread, the other — its compare-and-swap lost — lands on a fork
// at the response both continued, with the context it was answered in.
func TestPreviousResponseRace(t *testing.T) {
	for _, st := range respStores {
		t.Run(st.name, func(t *testing.T) {
			ctx := t.Context()
			model := &gated{ChatClient: scripted.Echo(), started: make(chan struct{}, 1), release: make(chan struct{})}
			s := newRespServer(t, st.open(t), model)
			r1, err := s.a.Responses.New(ctx, responses.ResponseNewParams{Model: "m", Input: text("one")})
			if err != nil {
				t.Fatal(err)
			}
			source := threadOf(r1.ID)
			type result struct {
				r   *responses.Response
				err error
			}
			slow := make(chan result, 1)
			go func() {
				r, err := s.a.Responses.New(ctx, responses.ResponseNewParams{Model: "m", Input: text("slow"), PreviousResponseID: openai.String(r1.ID)})
				slow <- result{r, err}
			}()
			<-model.started
			fast, err := s.a.Responses.New(ctx, responses.ResponseNewParams{Model: "m", Input: text("fast"), PreviousResponseID: openai.String(r1.ID)})
			if err != nil {
				t.Fatal(err)
			}
			close(model.release)
			res := <-slow
			if res.err != nil {
				t.Fatal(res.err)
			}
			if got := threadOf(fast.ID); got != source {
				t.Fatalf("the first commit went to %s, not %s", got, source)
			}
			fork := threadOf(res.r.ID)
			if fork == source || res.r.OutputText() != "You said: slow" {
				t.Fatalf("the second: %s", res.r.RawJSON())
			}
			if got := transcript(s.messages(t, fork)); got != "user: one\nassistant: You said: one\nuser: slow\nassistant: You said: slow\n" {
				t.Fatalf("fork:\n%s", got)
			}
			if got := transcript(s.messages(t, source)); got != "user: one\nassistant: You said: one\nuser: fast\nassistant: You said: fast\n" {
				t.Fatalf("source:\n%s", got)
			}
			if got, err := s.a.Responses.Get(ctx, res.r.ID, responses.ResponseGetParams{}); err != nil || got.OutputText() != "You said: slow" {
				t.Fatalf("get: %v", err)
			}
		})
	}
}

// A checkpoint named like a response, made by hand on a commit that holds
// none, is no response.
func TestCheckpointThatIsNoResponse(t *testing.T) {
	s := newRespServer(t, thread.NewMemoryStore(), scripted.Echo())
	th, err := s.db.WithTenant("a").Create(t.Context(), thread.CreateOptions{Messages: []message.Message{message.User("hi")}})
	if err != nil {
		t.Fatal(err)
	}
	key := "resp_0123456789abcdefghjkmnpqrs"
	if _, err := th.Checkpoint(t.Context(), key); err != nil {
		t.Fatal(err)
	}
	if _, err := s.a.Responses.Get(t.Context(), key+"_"+th.ID(), responses.ResponseGetParams{}); oaiError(t, err).StatusCode != 404 {
		t.Fatalf("get: %v", err)
	}
}

// A model turn of reasoning, text and two calls streams as four items,
// each announced, filled and done in order, and the response's output is
// those items, ids and all, as a stream accumulator checks.
func TestStreamMixedOutput(t *testing.T) {
	answer := message.New(message.RoleAssistant,
		message.Reasoning{Text: "think"}, message.Text{Text: "Hello"},
		message.FunctionCall{CallID: "c1", Name: "f", Arguments: "{}"}, message.FunctionCall{CallID: "c2", Name: "g", Arguments: `{"a":1}`})
	step := scripted.Step{Messages: []message.Message{answer}, Usage: message.Usage{InputTokens: 5, OutputTokens: 7}, Chunks: []agent.Update{
		{Reasoning: "thi"}, {Reasoning: "nk"}, {Text: "Hel"}, {Text: "lo"},
		{Call: &agent.CallDelta{Index: 0, CallID: "c1", Name: "f", Arguments: "{}"}},
		{Call: &agent.CallDelta{Index: 1, CallID: "c2", Name: "g", Arguments: `{"a"`}}, {Call: &agent.CallDelta{Index: 1, Arguments: `:1}`}},
	}}
	model := scripted.New(step, step)
	s := newRespServer(t, thread.NewMemoryStore(), model)
	ctx := t.Context()
	tools := []responses.ToolUnionParam{{OfFunction: &responses.FunctionToolParam{Name: "f"}}, {OfFunction: &responses.FunctionToolParam{Name: "g"}}}

	stream := s.a.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: "m", Input: text("go"), Tools: tools})
	var types []string
	added := map[int64]string{}
	done := map[int64]string{}
	var completed responses.Response
	for stream.Next() {
		ev := stream.Current()
		types = append(types, ev.Type)
		switch ev.Type {
		case "response.output_item.added":
			if _, dup := added[ev.OutputIndex]; dup || ev.OutputIndex != int64(len(added)) {
				t.Fatalf("added at %d after %d", ev.OutputIndex, len(added))
			}
			added[ev.OutputIndex] = ev.Item.ID
		case "response.output_item.done":
			done[ev.OutputIndex] = ev.Item.ID
		case "response.output_text.delta", "response.function_call_arguments.delta", "response.reasoning_summary_text.delta":
			if added[ev.OutputIndex] != ev.ItemID {
				t.Fatalf("%s for %s at %d, which is %s", ev.Type, ev.ItemID, ev.OutputIndex, added[ev.OutputIndex])
			}
		case "response.completed":
			completed = ev.Response
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	want := []string{"response.created", "response.in_progress",
		"response.output_item.added", "response.reasoning_summary_part.added", "response.reasoning_summary_text.delta", "response.reasoning_summary_text.delta",
		"response.reasoning_summary_text.done", "response.reasoning_summary_part.done", "response.output_item.done",
		"response.output_item.added", "response.content_part.added", "response.output_text.delta", "response.output_text.delta",
		"response.output_text.done", "response.content_part.done", "response.output_item.done",
		"response.output_item.added", "response.function_call_arguments.delta", "response.function_call_arguments.done", "response.output_item.done",
		"response.output_item.added", "response.function_call_arguments.delta", "response.function_call_arguments.delta", "response.function_call_arguments.done", "response.output_item.done",
		"response.completed"}
	if !slices.Equal(types, want) {
		t.Fatalf("events\n%q\nwant\n%q", types, want)
	}
	var outTypes []string
	for i, it := range completed.Output {
		outTypes = append(outTypes, it.Type)
		if it.ID != added[int64(i)] || it.ID != done[int64(i)] {
			t.Fatalf("output %d is %s, added %s, done %s", i, it.ID, added[int64(i)], done[int64(i)])
		}
	}
	if strings.Join(outTypes, " ") != "reasoning message function_call function_call" || completed.Output[3].AsFunctionCall().Arguments != `{"a":1}` ||
		completed.Usage.InputTokens != 5 || completed.Usage.OutputTokens != 7 || completed.Usage.TotalTokens != 12 {
		t.Fatalf("completed: %s", completed.RawJSON())
	}
	got, err := s.a.Responses.Get(ctx, completed.ID, responses.ResponseGetParams{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range got.Output {
		if got.Output[i].ID != completed.Output[i].ID || got.Output[i].Type != completed.Output[i].Type {
			t.Fatalf("stored: %s", got.RawJSON())
		}
	}

	// Not streamed: the same four items.
	r, err := s.a.Responses.New(ctx, responses.ResponseNewParams{Model: "m", Input: text("go"), Tools: tools})
	if err != nil {
		t.Fatal(err)
	}
	outTypes = nil
	for _, it := range r.Output {
		outTypes = append(outTypes, it.Type+":"+it.ID[:strings.IndexByte(it.ID, '_')])
	}
	if strings.Join(outTypes, " ") != "reasoning:rs message:msg function_call:fc function_call:fc" {
		t.Fatalf("output %q", outTypes)
	}
}

// The bodies the SDKs send by default (as SDKNOTES24 records them from the
// wire) are all accepted.
func TestSDKBodiesAccepted(t *testing.T) {
	tool := `{"type":"function","name":"get_weather","description":"weather","parameters":{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","title":"get_weather_args","properties":{"city":{"title":"City","type":"string"}},"required":["city"],"additionalProperties":false},"strict":true}`
	history := `{"id":"msg_01hist0000000000000000000a","type":"message","role":"user","status":"completed","content":[{"type":"input_text","text":"call get_weather {\"city\":\"Paris\"}"}]},` +
		`{"id":"fc_01hist0000000000000000000b","type":"function_call","name":"get_weather","call_id":"call_1","arguments":"{\"city\":\"Paris\"}","status":"completed"},` +
		`{"type":"function_call_output","id":"fco_01hist000000000000000000c","call_id":"call_1","output":"sunny","status":"completed"},` +
		`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Tool get_weather returned: sunny","annotations":[],"logprobs":[]}],"status":"completed"}`
	for _, tc := range []struct{ name, body, want string }{
		{"agents js", `{"model":"loom-model","instructions":"be brief","input":[` + history + `,{"role":"user","content":"weather in Paris?"}],"include":[],"tools":[` + tool + `],"stream":false}`, "You said: weather in Paris?"},
		{"agents js, within a turn", `{"model":"loom-model","input":[{"role":"user","content":"hi"},{"id":"fc_01turn0000000000000000000a","type":"function_call","name":"get_weather","call_id":"call_2","arguments":"{}","status":"completed"},{"type":"function_call_output","call_id":"call_2","output":"rain","status":"completed"}],"include":[],"tools":[` + tool + `],"stream":false}`, "Tool get_weather returned: rain"},
		{"agents python", `{"model":"loom","include":[],"input":[` + history + `,{"content":"Hello","role":"user"}],"instructions":"be brief","tools":[` + tool + `]}`, "You said: Hello"},
		{"python, conversation object", `{"model":"loom","conversation":{"id":"CONV"},"input":"Hello!"}`, "You said: Hello!"},
		{"python, conversation string", `{"model":"loom","conversation":"CONV","input":[{"role":"user","content":"again"}],"store":true,"parallel_tool_calls":true,"tool_choice":"auto","truncation":"disabled","text":{"format":{"type":"text"}},"top_logprobs":0}`, "You said: again"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newRespServer(t, thread.NewMemoryStore(), scripted.Echo())
			body := strings.ReplaceAll(tc.body, "CONV", s.conversation(t))
			req, _ := http.NewRequestWithContext(t.Context(), "POST", s.url+"/responses", strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+respKeyA)
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var r responses.Response
			data, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != 200 || json.Unmarshal(data, &r) != nil || r.OutputText() != tc.want {
				t.Fatalf("%d %s", resp.StatusCode, data)
			}
		})
	}
}

// A response's settings longer than one commit metadata value are kept
// over several, and read back whole.
func TestLongSettingsKept(t *testing.T) {
	eachStore(t, func(t *testing.T, s *respServer) {
		ctx := t.Context()
		long := strings.Repeat("Be brief, précis et concis. ", 600) // ~17 KB, multi-byte runes across chunk edges
		r, err := s.a.Responses.New(ctx, responses.ResponseNewParams{Model: "m", Input: text("hi"), Instructions: openai.String(long), Tools: weatherTool()})
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.a.Responses.Get(ctx, r.ID, responses.ResponseGetParams{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Instructions.OfString != long || len(got.Tools) != 1 || got.Tools[0].Name != "weather" || got.OutputText() != "You said: hi" {
			t.Fatalf("stored: %.300s", got.RawJSON())
		}
		th, err := s.db.WithTenant("a").Thread(ctx, threadOf(r.ID))
		if err != nil {
			t.Fatal(err)
		}
		c, err := s.db.Store().Commit(ctx, th.Record().Head)
		if err != nil {
			t.Fatal(err)
		}
		if len(c.Metadata["openai.response.4"]) == 0 || c.Metadata["openai.inputs"] != "1" {
			t.Fatalf("metadata keys: %d", len(c.Metadata))
		}
		// Settings past what a commit can hold are refused before the
		// model runs.
		calls := len(s.model.Requests())
		huge := strings.Repeat("x", 300_000)
		_, err = s.a.Responses.New(ctx, responses.ResponseNewParams{Model: "m", Input: text("hi"), Instructions: openai.String(huge)})
		if e := oaiError(t, err); e.StatusCode != 400 || len(s.model.Requests()) != calls {
			t.Fatalf("%v", err)
		}
	})
}

// A server without a model says how to give it one, and writes nothing.
func TestNoModel(t *testing.T) {
	s := serveResponses(t, thread.NewMemoryStore(), nil, true)
	_, err := s.a.Responses.New(t.Context(), responses.ResponseNewParams{Model: "m", Input: text("hi")})
	if e := oaiError(t, err); e.StatusCode != 400 || !strings.Contains(e.Message, "--provider") {
		t.Fatalf("%v", err)
	}
	if got := s.threads(t); len(got) != 0 {
		t.Fatalf("threads %v", got)
	}
}

// A streamed continuation that loses its thread to another keeps the id
// its first event announced: committed on a fork, it is found by that id,
// and continues there.
func TestStreamedResponseRaceKeepsItsID(t *testing.T) {
	for _, st := range respStores {
		t.Run(st.name, func(t *testing.T) {
			ctx := t.Context()
			model := &gated{ChatClient: scripted.Echo(), started: make(chan struct{}, 1), release: make(chan struct{})}
			s := newRespServer(t, st.open(t), model)
			r1, err := s.a.Responses.New(ctx, responses.ResponseNewParams{Model: "m", Input: text("one")})
			if err != nil {
				t.Fatal(err)
			}
			source := threadOf(r1.ID)
			stream := s.a.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: "m", Input: text("slow"), PreviousResponseID: openai.String(r1.ID)})
			if !stream.Next() || stream.Current().Type != "response.created" {
				t.Fatalf("first event: %v", stream.Err())
			}
			announced := stream.Current().Response.ID
			<-model.started
			if _, err := s.a.Responses.New(ctx, responses.ResponseNewParams{Model: "m", Input: text("fast"), PreviousResponseID: openai.String(r1.ID)}); err != nil {
				t.Fatal(err)
			}
			close(model.release)
			var completed responses.Response
			for stream.Next() {
				if ev := stream.Current(); ev.Type == "response.completed" {
					completed = ev.Response
				}
			}
			if err := stream.Err(); err != nil {
				t.Fatal(err)
			}
			if completed.ID != announced || completed.OutputText() != "You said: slow" {
				t.Fatalf("announced %s, completed %s", announced, completed.RawJSON())
			}
			got, err := s.a.Responses.Get(ctx, announced, responses.ResponseGetParams{})
			if err != nil || got.OutputText() != "You said: slow" {
				t.Fatalf("get %s: %v", announced, err)
			}
			// It lives on a fork of the source, and goes on there.
			next, err := s.a.Responses.New(ctx, responses.ResponseNewParams{Model: "m", Input: text("next"), PreviousResponseID: openai.String(announced)})
			if err != nil {
				t.Fatal(err)
			}
			fork := threadOf(next.ID)
			if fork == source {
				t.Fatalf("continued on the source: %s", next.ID)
			}
			if got := transcript(s.messages(t, fork)); got != "user: one\nassistant: You said: one\nuser: slow\nassistant: You said: slow\nuser: next\nassistant: You said: next\n" {
				t.Fatalf("fork:\n%s", got)
			}
			if err := s.a.Responses.Delete(ctx, announced); err != nil {
				t.Fatal(err)
			}
			if _, err := s.a.Responses.Get(ctx, announced, responses.ResponseGetParams{}); oaiError(t, err).StatusCode != 404 {
				t.Fatalf("after delete: %v", err)
			}
		})
	}
}

// An input item may not take the id of an item the conversation holds —
// a message's, or "<message id>.<k>" of the k-th item of a message with
// several — and is refused before the model runs.
func TestInputTakesNoItemID(t *testing.T) {
	s := newRespServer(t, thread.NewMemoryStore(), scripted.Echo())
	th, err := s.db.WithTenant("a").Create(t.Context(), thread.CreateOptions{Messages: []message.Message{
		{ID: "m_user", Role: message.RoleUser, Contents: []message.Content{message.Text{Text: "add and sub"}}},
		{ID: "m_asst", Role: message.RoleAssistant, Contents: []message.Content{
			message.FunctionCall{CallID: "c1", Name: "add", Arguments: "{}"}, message.FunctionCall{CallID: "c2", Name: "sub", Arguments: "{}"}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"m_user", "m_asst", "m_asst.1"} {
		_, err := s.a.Responses.New(t.Context(), responses.ResponseNewParams{Model: "m", Input: text("x"), Conversation: inConversation(th.ID())},
			option.WithJSONSet("input", []any{map[string]any{"id": id, "role": "user", "content": "hi"}}))
		if e := oaiError(t, err); e.StatusCode != 400 || e.Param != "input[0].id" {
			t.Fatalf("%s: %v", id, err)
		}
	}
	if n := len(s.model.Requests()); n != 0 {
		t.Fatalf("the model ran %d times", n)
	}
	if _, err := s.a.Responses.New(t.Context(), responses.ResponseNewParams{Model: "m", Conversation: inConversation(th.ID())},
		option.WithJSONSet("input", []any{map[string]any{"id": "m_asst.2", "role": "user", "content": "hi"}})); err != nil {
		t.Fatal(err)
	}
}

// Settings that pass the check before the model runs are saved, whatever
// the model's answer adds: near the limit, a request is either answered
// and stored, or refused before the model runs.
func TestSettingsNearTheLimit(t *testing.T) {
	s := newRespServer(t, thread.NewMemoryStore(), scripted.Echo())
	answered, refused := 0, 0
	for n := 239_000; n <= 239_800; n += 100 {
		calls := len(s.model.Requests())
		r, err := s.a.Responses.New(t.Context(), responses.ResponseNewParams{Model: "m", Input: text("hi"), Instructions: openai.String(strings.Repeat("x", n))})
		if err != nil {
			if e := oaiError(t, err); e.StatusCode != 400 || len(s.model.Requests()) != calls {
				t.Fatalf("%d: %v, the model ran %d times", n, err, len(s.model.Requests())-calls)
			}
			refused++
			continue
		}
		if _, err := s.a.Responses.Get(t.Context(), r.ID, responses.ResponseGetParams{}); err != nil {
			t.Fatalf("%d: %v", n, err)
		}
		answered++
	}
	if answered == 0 || refused == 0 {
		t.Fatalf("%d answered, %d refused: the sizes miss the limit", answered, refused)
	}
}
