package foundry

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"net/http"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"

	"github.com/loomthreads/loom/agent"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

// ClassicOptions configure a Classic client. Endpoint and Agent are
// required (or their environment variables); with no APIKey (nor
// AZURE_AI_API_KEY) and no Credential, the client uses azidentity's
// DefaultAzureCredential.
type ClassicOptions struct {
	// Endpoint is the Foundry project endpoint,
	// https://<resource>.services.ai.azure.com/api/projects/<project>;
	// "" means $AZURE_AI_PROJECT_ENDPOINT.
	Endpoint string
	// Agent is the id of the agent that runs (asst_…); "" means
	// $AZURE_AI_AGENT_ID.
	Agent string
	// APIVersion is sent as api-version; "" means "v1".
	APIVersion string
	// APIKey authenticates with an api-key header; "" means
	// $AZURE_AI_API_KEY, and then Credential.
	APIKey string
	// Credential gives Entra ID tokens for Scope; nil (with no API key)
	// means azidentity's DefaultAzureCredential: the environment, a managed
	// identity, the Azure CLI's login. Tokens are kept until two minutes
	// before they expire.
	Credential azcore.TokenCredential
	// HTTPClient sends the requests; nil means http.DefaultClient.
	HTTPClient *http.Client
	// MaxRetries is how many times a request refused with 429 or 5xx is
	// sent again, after what Retry-After says; 0 means 3, negative none.
	MaxRetries int
	// PollInterval is how often a run that is not streamed is read until
	// it ends; 0 means 500 ms.
	PollInterval time.Duration
}

// Classic is a chat client for Foundry agents (classic): the
// Assistants-style protocol of agents, threads, messages and runs. Each
// loom thread it runs on is service-managed: it becomes a Foundry thread
// on its first run (or adopts one by id, agent.NewServiceThread), the
// service keeps the conversation, and the named agent answers it. The
// service keeps one linear thread, so loom refuses to fork or roll back
// such a thread (thread.ErrUnsupported).
//
// A run that asks for tools stops with their calls, which loom's agent
// runs with its own tools; their results go back to the same run
// (submit_tool_outputs). The conversation id it hands loom is the Foundry
// thread's id, with the run's id after a '|' while the run waits for tool
// outputs.
type Classic struct {
	t     *transport
	agent string
	poll  time.Duration
}

var _ agent.ChatClient = (*Classic)(nil)

// NewClassic returns a client of opts. It makes no request.
func NewClassic(opts ClassicOptions) (*Classic, error) {
	if opts.APIVersion == "" {
		opts.APIVersion = "v1"
	}
	t, agentID, err := newTransport(connection{endpoint: opts.Endpoint, agent: opts.Agent, agentEnv: "AZURE_AI_AGENT_ID",
		apiVersion: opts.APIVersion, apiKey: opts.APIKey, cred: opts.Credential, http: opts.HTTPClient, retries: opts.MaxRetries})
	if err != nil {
		return nil, err
	}
	opts.Agent = agentID
	c := &Classic{t: t, agent: opts.Agent, poll: opts.PollInterval}
	if c.poll <= 0 {
		c.poll = 500 * time.Millisecond
	}
	return c, nil
}

// Capabilities implements agent.ChatClient: service threads (linear),
// streaming and tools.
func (c *Classic) Capabilities() agent.Capabilities {
	return agent.Capabilities{ServiceThreads: true, Streaming: true, Tools: true}
}

// The wire types of the classic protocol.
type (
	wireText struct {
		Value string `json:"value"`
	}
	wireContent struct {
		Type string    `json:"type"`
		Text *wireText `json:"text,omitempty"`
	}
	wireMessage struct {
		ID        string        `json:"id,omitempty"`
		Role      string        `json:"role"`
		Content   []wireContent `json:"content"`
		RunID     string        `json:"run_id,omitempty"`
		CreatedAt int64         `json:"created_at,omitempty"`
	}
	wireFunction struct {
		Name        string          `json:"name"`
		Arguments   string          `json:"arguments,omitempty"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters,omitempty"`
	}
	wireToolCall struct {
		ID       string       `json:"id"`
		Type     string       `json:"type"`
		Function wireFunction `json:"function"`
	}
	wireTool struct {
		Type     string       `json:"type"`
		Function wireFunction `json:"function"`
	}
	wireRun struct {
		ID             string `json:"id"`
		ThreadID       string `json:"thread_id"`
		Status         string `json:"status"`
		RequiredAction *struct {
			Type              string `json:"type"`
			SubmitToolOutputs struct {
				ToolCalls []wireToolCall `json:"tool_calls"`
			} `json:"submit_tool_outputs"`
		} `json:"required_action"`
		LastError *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"last_error"`
		Usage *struct {
			PromptTokens     int64 `json:"prompt_tokens"`
			CompletionTokens int64 `json:"completion_tokens"`
			TotalTokens      int64 `json:"total_tokens"`
		} `json:"usage"`
	}
	wireList[T any] struct {
		Data    []T  `json:"data"`
		HasMore bool `json:"has_more"`
	}
)

// splitID reads a conversation id: the thread, and the run waiting for
// tool outputs, if any.
func splitID(id string) (threadID, runID string) {
	threadID, runID, _ = strings.Cut(id, "|")
	return threadID, runID
}

// ThreadID returns the Foundry thread of a conversation id this client
// made: the id itself, or what comes before the '|' that names a run
// waiting for tool outputs.
func ThreadID(conversationID string) string {
	threadID, _ := splitID(conversationID)
	return threadID
}

// started is a run as start leaves it: the thread it runs on, the run (or
// its events, streamed), and the last message of the thread before the
// run's answer, after which to read it.
type started struct {
	thread string
	run    wireRun
	events *http.Response
	after  string
}

// start sends msgs to the thread (a new one when id is "") and starts the
// run that answers them: a new run for new messages, or, with the tool
// results a waiting run asked for, that run again. A run that waits takes
// nothing but its tool results (the service refuses messages while a run
// is active): other messages then are thread.ErrUnsupported, and nothing
// is sent. A waiting run that the service ended meanwhile (it expires runs
// that wait too long) gets the results as a message, in a new run. With
// stream, the run's events are handed back open.
func (c *Classic) start(ctx context.Context, msgs []message.Message, opts *agent.ChatOptions, stream bool) (started, error) {
	var st started
	threadID, waiting := splitID(opts.ConversationID)
	var outputs []map[string]string
	var posts []map[string]any
	extra := opts.Instructions
	for _, m := range msgs {
		for _, r := range m.Results() {
			out := r.Result
			if r.IsError {
				out = "Error: " + out
			}
			outputs = append(outputs, map[string]string{"tool_call_id": r.CallID, "output": out})
		}
		if len(m.Results()) > 0 {
			continue
		}
		for _, ct := range m.Contents {
			switch ct.(type) {
			case message.Text, message.Usage, message.Reasoning:
			default:
				return st, fmt.Errorf("foundry: classic threads take text messages, not %s: %w", ct.Type(), thread.ErrUnsupported)
			}
		}
		switch m.Role {
		case message.RoleSystem:
			extra = strings.TrimSpace(extra + "\n\n" + m.Text())
		case message.RoleUser, message.RoleAssistant:
			if m.Text() != "" {
				posts = append(posts, map[string]any{"role": string(m.Role), "content": m.Text()})
			}
		}
	}
	if waiting != "" {
		if len(posts) > 0 {
			return st, fmt.Errorf("foundry: run %s waits for tool outputs; new messages go after it ends: %w", waiting, thread.ErrUnsupported)
		}
		var run wireRun
		if err := c.t.do(ctx, "GET", "/threads/"+threadID+"/runs/"+waiting, nil, nil, &run); err != nil {
			return st, err
		}
		if run.Status == "requires_action" {
			if len(outputs) == 0 {
				return st, fmt.Errorf("foundry: run %s waits for tool outputs, and none came: %w", waiting, thread.ErrInvalid)
			}
			after, err := c.lastMessage(ctx, threadID)
			if err != nil {
				return st, err
			}
			st.thread, st.after = threadID, after
			var out any = &st.run
			if stream {
				out = &st.events
			}
			err = c.t.do(ctx, "POST", "/threads/"+threadID+"/runs/"+waiting+"/submit_tool_outputs", nil,
				map[string]any{"tool_outputs": outputs, "stream": stream}, out)
			return st, err
		}
		// The run ended without its outputs: they go as a message.
		if len(outputs) > 0 {
			b, _ := json.Marshal(outputs)
			posts = append(posts, map[string]any{"role": "user", "content": "The results of the tool calls of run " + waiting + ": " + string(b)})
		}
	}
	if threadID == "" {
		var th struct {
			ID string `json:"id"`
		}
		if err := c.t.do(ctx, "POST", "/threads", nil, map[string]any{}, &th); err != nil {
			return st, err
		}
		threadID = th.ID
	}
	st.thread = threadID
	for _, p := range posts {
		if err := c.t.do(ctx, "POST", "/threads/"+threadID+"/messages", nil, p, nil); err != nil {
			return st, err
		}
	}
	after, err := c.lastMessage(ctx, threadID)
	if err != nil {
		return st, err
	}
	st.after = after
	body := map[string]any{"assistant_id": c.agent, "stream": stream}
	if extra != "" {
		body["additional_instructions"] = extra
	}
	// The agent's tools are its own; loom's, when the loom agent has some,
	// replace them for the run (the protocol has no merge).
	if len(opts.Tools) > 0 {
		var tools []wireTool
		for _, t := range opts.Tools {
			tools = append(tools, wireTool{Type: "function", Function: wireFunction{Name: t.Name, Description: t.Description, Parameters: t.Parameters}})
		}
		body["tools"] = tools
	}
	switch opts.ToolChoice {
	case agent.ToolNone:
		body["tool_choice"] = "none"
	case agent.ToolRequired:
		body["tool_choice"] = "required"
	}
	if opts.Temperature != nil {
		body["temperature"] = *opts.Temperature
	}
	if opts.MaxTokens > 0 {
		body["max_completion_tokens"] = opts.MaxTokens
	}
	var out any = &st.run
	if stream {
		out = &st.events
	}
	err = c.t.do(ctx, "POST", "/threads/"+threadID+"/runs", nil, body, out)
	return st, err
}

// lastMessage returns the id of the thread's newest message, "" if none.
func (c *Classic) lastMessage(ctx context.Context, threadID string) (string, error) {
	var page wireList[wireMessage]
	if err := c.t.do(ctx, "GET", "/threads/"+threadID+"/messages", map[string]string{"order": "desc", "limit": "1"}, nil, &page); err != nil {
		return "", err
	}
	if len(page.Data) == 0 {
		return "", nil
	}
	return page.Data[0].ID, nil
}

// cancel asks the service to stop a run that loom stopped waiting for, so
// that the thread takes the next one.
func (c *Classic) cancel(ctx context.Context, threadID, runID string) {
	ctx, stop := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer stop()
	c.t.do(ctx, "POST", "/threads/"+threadID+"/runs/"+runID+"/cancel", nil, map[string]any{}, nil)
}

// Response implements agent.ChatClient: it runs the agent on the thread
// and reads the run until it ends or asks for tools.
func (c *Classic) Response(ctx context.Context, msgs []message.Message, opts *agent.ChatOptions) (*agent.ChatResponse, error) {
	if opts == nil {
		opts = &agent.ChatOptions{}
	}
	st, err := c.start(ctx, msgs, opts, false)
	if err != nil {
		return nil, err
	}
	for st.run.Status == "queued" || st.run.Status == "in_progress" || st.run.Status == "cancelling" {
		err := sleepCtx(ctx, c.poll)
		if err == nil {
			err = c.t.do(ctx, "GET", "/threads/"+st.thread+"/runs/"+st.run.ID, nil, nil, &st.run)
		}
		if err != nil {
			if ctx.Err() != nil {
				c.cancel(ctx, st.thread, st.run.ID)
			}
			return nil, err
		}
	}
	return c.finish(ctx, st)
}

// finish makes the response of a run that ended or asks for tools.
func (c *Classic) finish(ctx context.Context, st started) (*agent.ChatResponse, error) {
	threadID, run := st.thread, st.run
	resp := &agent.ChatResponse{ConversationID: threadID, ResponseID: run.ID, Model: c.agent}
	if run.Usage != nil {
		resp.Usage = message.Usage{InputTokens: run.Usage.PromptTokens, OutputTokens: run.Usage.CompletionTokens, TotalTokens: run.Usage.TotalTokens}
	}
	switch run.Status {
	case "requires_action":
		if run.RequiredAction == nil || run.RequiredAction.Type != "submit_tool_outputs" && run.RequiredAction.Type != "" {
			typ := ""
			if run.RequiredAction != nil {
				typ = run.RequiredAction.Type
			}
			c.cancel(ctx, threadID, run.ID)
			return nil, &agent.ProviderError{Provider: "foundry", Type: "requires_action", Message: fmt.Sprintf("run %s requires an action loom cannot take (%q); it was cancelled", run.ID, typ)}
		}
		// What the run wrote before it asked comes first.
		before, err := c.runMessages(ctx, threadID, run.ID, st.after)
		if err != nil {
			return nil, err
		}
		m := message.New(message.RoleAssistant)
		for _, tc := range run.RequiredAction.SubmitToolOutputs.ToolCalls {
			m.Contents = append(m.Contents, message.FunctionCall{CallID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
		}
		resp.Messages = append(before, m)
		resp.FinishReason = agent.FinishToolCalls
		resp.ConversationID = threadID + "|" + run.ID
		return resp, nil
	case "completed", "incomplete":
		msgs, err := c.runMessages(ctx, threadID, run.ID, st.after)
		if err != nil {
			return nil, err
		}
		resp.Messages = msgs
		resp.FinishReason = agent.FinishStop
		if run.Status == "incomplete" {
			resp.FinishReason = agent.FinishLength
		}
		return resp, nil
	}
	e := &agent.ProviderError{Provider: "foundry", Type: run.Status, Message: "run " + run.ID + " " + run.Status}
	if run.LastError != nil {
		e.Type, e.Message = run.LastError.Code, run.LastError.Message+" (run "+run.ID+")"
	}
	return nil, e
}

// runMessages reads the messages a run wrote after the message after,
// oldest first.
func (c *Classic) runMessages(ctx context.Context, threadID, runID, after string) ([]message.Message, error) {
	var out []message.Message
	for m, err := range c.Messages(ctx, threadID, MessagesOptions{RunID: runID, After: after}) {
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

// MessagesOptions select the messages Messages reads.
type MessagesOptions struct {
	// After is the cursor: the messages after this message id.
	After string
	// RunID reads only the messages of one run.
	RunID string
	// PageSize is the page a request reads; 0 means 100.
	PageSize int
}

// Messages yields a Foundry thread's messages, oldest first, a page at a
// time (the service's cursors: after, has_more).
func (c *Classic) Messages(ctx context.Context, threadID string, opts MessagesOptions) iter.Seq2[message.Message, error] {
	path := "/threads/" + ThreadID(threadID) + "/messages"
	return func(yield func(message.Message, error) bool) {
		for wm, err := range pages(ctx, c.t, path, map[string]string{"run_id": opts.RunID}, opts, func(wm wireMessage) string { return wm.ID }) {
			if err != nil {
				yield(message.Message{}, err)
				return
			}
			if !yield(fromWire(wm), nil) {
				return
			}
		}
	}
}

// pages yields the items of a list the service reads a page at a time,
// oldest first: q with order, limit (opts.PageSize, 100 when 0) and after
// (opts.After at first, then the id of each page's last item) while the
// service says has_more.
func pages[T any](ctx context.Context, t *transport, path string, q map[string]string, opts MessagesOptions, id func(T) string) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		size := opts.PageSize
		if size <= 0 {
			size = 100
		}
		after := opts.After
		for {
			var page wireList[T]
			pq := map[string]string{"order": "asc", "limit": fmt.Sprint(size), "after": after}
			for k, v := range q {
				pq[k] = v
			}
			if err := t.do(ctx, "GET", path, pq, nil, &page); err != nil {
				var zero T
				yield(zero, err)
				return
			}
			for _, it := range page.Data {
				if !yield(it, nil) {
					return
				}
			}
			if !page.HasMore || len(page.Data) == 0 {
				return
			}
			after = id(page.Data[len(page.Data)-1])
		}
	}
}

func fromWire(wm wireMessage) message.Message {
	role := message.RoleAssistant
	if wm.Role == "user" {
		role = message.RoleUser
	}
	m := message.New(role)
	for _, c := range wm.Content {
		if c.Type == "text" && c.Text != nil {
			m.Contents = append(m.Contents, message.Text{Text: c.Text.Value})
		}
	}
	m.Metadata = map[string]any{"foundry.message_id": wm.ID}
	if wm.CreatedAt > 0 {
		m.CreatedAt = time.Unix(wm.CreatedAt, 0).UTC()
	}
	return m
}

// DeleteThread deletes the Foundry thread (not the loom thread).
func (c *Classic) DeleteThread(ctx context.Context, threadID string) error {
	threadID, _ = splitID(threadID)
	return c.t.do(ctx, "DELETE", "/threads/"+threadID, nil, nil, nil)
}

// Stream implements agent.ChatClient: the run's events, as they come.
func (c *Classic) Stream(ctx context.Context, msgs []message.Message, opts *agent.ChatOptions) iter.Seq2[agent.Update, error] {
	return func(yield func(agent.Update, error) bool) {
		if opts == nil {
			opts = &agent.ChatOptions{}
		}
		st, err := c.start(ctx, msgs, opts, true)
		if err != nil {
			yield(agent.Update{}, err)
			return
		}
		events := st.events
		defer events.Body.Close()
		runID, ended := "", false
		defer func() {
			// A stream given up (a consumer that stopped, a context that
			// ended) leaves no run behind to block the thread's next one.
			if !ended && runID != "" {
				c.cancel(ctx, st.thread, runID)
			}
		}()
		sc := bufio.NewScanner(events.Body)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		var name string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event:"):
				name = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
				continue
			case !strings.HasPrefix(line, "data:"):
				continue
			}
			data := strings.TrimSpace(strings.TrimPrefix(line, "data:"))
			if strings.HasPrefix(name, "thread.run.") && runID == "" {
				var r wireRun
				if json.Unmarshal([]byte(data), &r) == nil {
					runID = r.ID
				}
			}
			switch name {
			case "thread.message.delta":
				var d struct {
					Delta struct {
						Content []wireContent `json:"content"`
					} `json:"delta"`
				}
				if json.Unmarshal([]byte(data), &d) != nil {
					continue
				}
				for _, c := range d.Delta.Content {
					if c.Text != nil && c.Text.Value != "" {
						if !yield(agent.Update{Text: c.Text.Value}, nil) {
							return
						}
					}
				}
			case "thread.run.requires_action", "thread.run.completed", "thread.run.incomplete", "thread.run.failed", "thread.run.cancelled", "thread.run.expired":
				var run wireRun
				if err := json.Unmarshal([]byte(data), &run); err != nil {
					yield(agent.Update{}, &agent.ProviderError{Provider: "foundry", Message: "a run event that is not a run" + requestID(events.Header), Err: err})
					return
				}
				ended = true
				st.run = run
				resp, err := c.finish(ctx, st)
				if err != nil {
					yield(agent.Update{}, err)
					return
				}
				if yield(agent.Update{Usage: &resp.Usage}, nil) {
					yield(agent.Update{Response: resp}, nil)
				}
				return
			case "error":
				yield(agent.Update{}, &agent.ProviderError{Provider: "foundry", Message: "the stream failed: " + data + requestID(events.Header)})
				return
			}
		}
		if err := sc.Err(); err != nil && ctx.Err() == nil {
			yield(agent.Update{}, &agent.ProviderError{Provider: "foundry", Message: "the stream broke" + requestID(events.Header), Err: err})
			return
		}
		if ctx.Err() != nil {
			yield(agent.Update{}, ctx.Err())
			return
		}
		yield(agent.Update{}, &agent.ProviderError{Provider: "foundry", Message: "the stream ended before its run did" + requestID(events.Header)})
	}
}
