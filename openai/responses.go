package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"slices"
	"strings"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/conversations"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/loomthreads/loom/agent"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

// ResponsesOptions configure a Responses client.
type ResponsesOptions struct {
	Options
	// Conversations keeps service threads as conversations of the
	// Conversations API: one linear conversation per thread, which loom
	// cannot fork or rewind. False (the default) chains responses by
	// previous_response_id, where every response id names the conversation
	// up to it, so threads can be forked and rolled back.
	Conversations bool
}

// Responses is a chat client on OpenAI's Responses API. The service can keep
// the conversation (ChatOptions.Store nil or true, the default), so that a
// thread sends only its new messages: see ResponsesOptions.Conversations for
// the two ways it keeps them.
//
// Reasoning items come back as message.Reasoning contents (the summary as
// Text, encrypted_content as Protected, asked for when Store is false), with
// their item ids in the assistant message's Metadata under
// "openai/reasoning_ids". Reasoning is sent back only from messages that
// carry those ids, since the API names reasoning items by id; reasoning from
// other providers is left out. Summaries are returned only when asked for,
// for example with option.WithJSONSet("reasoning.summary", "auto") in
// Options.RequestOptions. Message.AuthorName is not sent: input messages have
// no name field.
type Responses struct {
	client        sdk.Client
	model         string
	conversations bool
}

var _ agent.ChatClient = (*Responses)(nil)

// reasoningIDsKey is the Metadata key under which an assistant message keeps
// the ids of its reasoning items, in the order of its Reasoning contents.
const reasoningIDsKey = "openai/reasoning_ids"

// NewResponses returns a Responses API client. It makes no request.
func NewResponses(opts ResponsesOptions) *Responses {
	return &Responses{client: newClient(opts.Options), model: opts.Model, conversations: opts.Conversations}
}

// Capabilities reports service threads, streaming and tools, and chaining
// unless conversations keep the threads.
func (r *Responses) Capabilities() agent.Capabilities {
	return agent.Capabilities{ServiceThreads: true, Chaining: !r.conversations, Streaming: true, Tools: true}
}

// Response sends msgs and returns the model's whole response. In
// Conversations mode, a stored request without a ConversationID first
// creates the conversation.
func (r *Responses) Response(ctx context.Context, msgs []message.Message, opts *agent.ChatOptions) (*agent.ChatResponse, error) {
	req, err := r.prepare(ctx, msgs, opts)
	if err != nil {
		return nil, err
	}
	var raw *http.Response
	resp, err := r.client.Responses.New(ctx, req.params, option.WithResponseInto(&raw))
	if err != nil {
		return nil, wrapError(ctx, err, raw)
	}
	return req.result(resp)
}

// Stream sends msgs and yields text, reasoning-summary, tool-call and usage
// deltas as they arrive, then the whole response, built from the final
// event as Response would have built it.
func (r *Responses) Stream(ctx context.Context, msgs []message.Message, opts *agent.ChatOptions) iter.Seq2[agent.Update, error] {
	return func(yield func(agent.Update, error) bool) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		req, err := r.prepare(ctx, msgs, opts)
		if err != nil {
			yield(agent.Update{}, err)
			return
		}
		var raw *http.Response
		_, err = r.client.Responses.New(ctx, req.params,
			option.WithJSONSet("stream", true), option.WithResponseBodyInto(&raw))
		if err != nil {
			yield(agent.Update{}, wrapError(ctx, err, raw))
			return
		}
		if raw == nil || raw.Body == nil {
			yield(agent.Update{}, errors.New("openai: no response body"))
			return
		}
		defer raw.Body.Close()

		if isJSON(raw) {
			var resp responses.Response
			if err := decodeJSON(raw, &resp); err != nil {
				yield(agent.Update{}, readError(ctx, err))
				return
			}
			out, err := req.result(&resp)
			replay(yield, out, err)
			return
		}

		s := responsesStream{callIndex: map[int64]int{}, items: map[int64]responses.ResponseOutputItemUnion{}}
		dec := ssestream.NewDecoder(raw)
		for dec.Next() {
			data := bytes.TrimSpace(dec.Event().Data)
			if len(data) == 0 || bytes.Equal(data, []byte("[DONE]")) {
				continue
			}
			if err := eventError(data); err != nil {
				yield(agent.Update{}, err)
				return
			}
			var ev responses.ResponseStreamEventUnion
			if err := json.Unmarshal(data, &ev); err != nil {
				yield(agent.Update{}, fmt.Errorf("openai: stream: %w", err))
				return
			}
			ups, final, err := s.add(&ev)
			if err != nil {
				yield(agent.Update{}, err)
				return
			}
			for _, u := range ups {
				if !yield(u, nil) {
					return
				}
			}
			if final == nil {
				continue
			}
			out, err := req.result(final)
			if err != nil {
				yield(agent.Update{}, err)
				return
			}
			if out.Usage != (message.Usage{}) {
				u := out.Usage
				if !yield(agent.Update{Usage: &u}, nil) {
					return
				}
			}
			yield(agent.Update{Response: out}, nil)
			return
		}
		yield(agent.Update{}, readError(ctx, dec.Err()))
	}
}

// request is a prepared request with what its result depends on.
type request struct {
	params       responses.ResponseNewParams
	store        bool
	conversation string // the conversation in Conversations mode
	chaining     bool
}

// prepare builds the request. Everything that can be refused is checked
// before a conversation is created, so a bad request leaves nothing behind.
func (r *Responses) prepare(ctx context.Context, msgs []message.Message, opts *agent.ChatOptions) (*request, error) {
	if opts == nil {
		opts = &agent.ChatOptions{}
	}
	mdl, err := model(r.model, opts)
	if err != nil {
		return nil, err
	}
	input, err := responsesInput(msgs)
	if err != nil {
		return nil, err
	}
	req := &request{store: opts.Store == nil || *opts.Store, chaining: !r.conversations}
	p := &req.params
	p.Model = mdl
	p.Store = param.NewOpt(req.store)
	if !req.store {
		// Without a stored response, reasoning can be sent back only as
		// the encrypted content.
		p.Include = []responses.ResponseIncludable{responses.ResponseIncludableReasoningEncryptedContent}
	}
	if len(input) > 0 {
		p.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: input}
	}
	if opts.Instructions != "" {
		p.Instructions = param.NewOpt(opts.Instructions)
	}
	for _, t := range opts.Tools {
		schema, err := rawSchema(t.Parameters, "tool "+t.Name)
		if err != nil {
			return nil, err
		}
		if schema == nil {
			schema = json.RawMessage(`{"type":"object","properties":{}}`) // the API requires one
		}
		ft := &responses.FunctionToolParam{Name: t.Name, Strict: param.NewOpt(false)}
		if t.Description != "" {
			ft.Description = param.NewOpt(t.Description)
		}
		ft.SetExtraFields(map[string]any{"parameters": schema})
		p.Tools = append(p.Tools, responses.ToolUnionParam{OfFunction: ft})
	}
	switch tc := opts.ToolChoice; tc {
	case "":
	case agent.ToolAuto, agent.ToolNone, agent.ToolRequired:
		p.ToolChoice = responses.ResponseNewParamsToolChoiceUnion{OfToolChoiceMode: param.NewOpt(responses.ToolChoiceOptions(tc))}
	default:
		p.ToolChoice = responses.ResponseNewParamsToolChoiceUnion{OfFunctionTool: &responses.ToolChoiceFunctionParam{Name: string(tc)}}
	}
	if opts.Temperature != nil {
		p.Temperature = param.NewOpt(*opts.Temperature)
	}
	if opts.MaxTokens != 0 {
		p.MaxOutputTokens = param.NewOpt(int64(opts.MaxTokens))
	}
	if rf := opts.ResponseFormat; rf != nil {
		schema, err := rawSchema(rf.Schema, "response format")
		if err != nil {
			return nil, err
		}
		if schema == nil {
			p.Text.Format = responses.ResponseFormatTextConfigUnionParam{OfJSONObject: &shared.ResponseFormatJSONObjectParam{}}
		} else {
			js := &responses.ResponseFormatTextJSONSchemaConfigParam{Name: schemaName(rf.Name), Strict: param.NewOpt(rf.Strict)}
			js.SetExtraFields(map[string]any{"schema": schema})
			p.Text.Format = responses.ResponseFormatTextConfigUnionParam{OfJSONSchema: js}
		}
	}
	if len(opts.Metadata) > 0 {
		p.Metadata = shared.Metadata(opts.Metadata)
	}

	if req.chaining {
		if opts.ConversationID != "" {
			p.PreviousResponseID = param.NewOpt(opts.ConversationID)
		}
		return req, nil
	}
	req.conversation = opts.ConversationID
	if req.conversation == "" && req.store {
		var raw *http.Response
		conv, err := r.client.Conversations.New(ctx, conversations.ConversationNewParams{}, option.WithResponseInto(&raw))
		if err != nil {
			return nil, wrapError(ctx, err, raw)
		}
		if conv == nil || conv.ID == "" {
			return nil, fmt.Errorf("openai: server created a conversation without an id")
		}
		req.conversation = conv.ID
	}
	if req.conversation != "" {
		p.Conversation = responses.ResponseNewParamsConversationUnion{OfString: param.NewOpt(req.conversation)}
	}
	return req, nil
}

// result converts a response. A failed response is an error, as it would
// have been had the API reported it with an HTTP status.
func (req *request) result(resp *responses.Response) (*agent.ChatResponse, error) {
	if resp == nil {
		return nil, fmt.Errorf("openai: empty response")
	}
	// Some compatible servers report errors with status 200 and no status.
	if resp.Status == responses.ResponseStatusFailed || (resp.Status == "" && resp.Error.Message != "") {
		msg := resp.Error.Message
		if msg == "" {
			msg = "response failed"
		}
		return nil, &agent.ProviderError{Provider: provider, Type: string(resp.Error.Code), Message: msg}
	}
	var (
		contents []message.Content
		ids      []any
		calls    []message.FunctionCall
	)
	for _, item := range resp.Output {
		switch item.Type {
		case "message":
			for _, c := range item.Content {
				contents = append(contents, message.Text{Text: c.Text + c.Refusal})
			}
		case "reasoning":
			ri := item.AsReasoning()
			contents = append(contents, message.Reasoning{Text: reasoningText(ri), Protected: ri.EncryptedContent})
			ids = append(ids, utf8Valid(ri.ID))
		case "function_call":
			fc := item.AsFunctionCall()
			call := message.FunctionCall{CallID: callID(fc.CallID), Name: fc.Name, Arguments: fc.Arguments}
			calls = append(calls, call)
			contents = append(contents, call)
		default:
			// Items of tools loom does not run (web search, MCP…) are
			// kept as they came, so the thread records what happened.
			if c, err := message.UnmarshalContent([]byte(item.RawJSON())); err == nil {
				if _, ok := c.(message.Unknown); ok {
					contents = append(contents, c)
				}
			}
		}
	}
	if err := checkCalls(calls); err != nil {
		return nil, err
	}
	var meta map[string]any
	if len(ids) > 0 {
		meta = map[string]any{reasoningIDsKey: ids}
	}
	reason := ""
	if resp.Status == responses.ResponseStatusIncomplete {
		reason = resp.IncompleteDetails.Reason
		if reason == "" {
			reason = "length"
		}
	}
	out := &agent.ChatResponse{
		Messages:     []message.Message{assistant(contents, meta)},
		ResponseID:   resp.ID,
		Model:        resp.Model,
		Usage:        responsesUsage(resp.Usage),
		FinishReason: finish(reason, len(calls) > 0),
	}
	switch {
	case !req.store:
	case req.chaining:
		out.ConversationID = resp.ID
	default:
		out.ConversationID = req.conversation
	}
	return out, nil
}

// reasoningText is a reasoning item's summary, or its full text from models
// that return it (open-weight models behind compatible servers).
func reasoningText(ri responses.ResponseReasoningItem) string {
	var parts []string
	for _, s := range ri.Summary {
		parts = append(parts, s.Text)
	}
	if len(parts) == 0 {
		for _, c := range ri.Content {
			parts = append(parts, c.Text)
		}
	}
	return strings.Join(parts, "\n\n")
}

func responsesUsage(u responses.ResponseUsage) message.Usage {
	total := u.TotalTokens
	if total == 0 {
		total = u.InputTokens + u.OutputTokens
	}
	return message.Usage{
		InputTokens:       u.InputTokens,
		OutputTokens:      u.OutputTokens,
		TotalTokens:       total,
		CachedInputTokens: u.InputTokensDetails.CachedTokens,
		ReasoningTokens:   u.OutputTokensDetails.ReasoningTokens,
	}
}

// responsesInput converts a conversation to input items.
func responsesInput(msgs []message.Message) (responses.ResponseInputParam, error) {
	var out responses.ResponseInputParam
	for i, m := range msgs {
		items, err := responsesItems(m)
		if err != nil {
			return nil, fmt.Errorf("openai: message %d (%s): %w", i, m.Role, err)
		}
		out = append(out, items...)
	}
	return out, nil
}

// responsesItems converts one message to items in the order of its
// contents: text and data make message items, calls, results and reasoning
// their own items.
func responsesItems(m message.Message) ([]responses.ResponseInputItemUnionParam, error) {
	var (
		role    responses.EasyInputMessageRole
		roleErr error // why the message cannot carry text or data
	)
	switch m.Role {
	case message.RoleSystem, message.RoleUser, message.RoleAssistant, "developer":
		role = responses.EasyInputMessageRole(m.Role)
	case message.RoleTool:
		roleErr = fmt.Errorf("tool message with text outside a function result: %w", thread.ErrInvalid)
	default:
		roleErr = fmt.Errorf("role %q is not one the API knows: %w", m.Role, thread.ErrInvalid)
	}
	var (
		out     []responses.ResponseInputItemUnionParam
		text    strings.Builder
		parts   responses.ResponseInputMessageContentListParam
		hasData bool
	)
	flush := func() error {
		if len(parts) == 0 {
			return nil
		}
		if roleErr != nil {
			return roleErr
		}
		msg := &responses.EasyInputMessageParam{Role: role}
		if hasData {
			msg.Content.OfInputItemContentList = parts
		} else {
			msg.Content.OfString = param.NewOpt(text.String())
		}
		out = append(out, responses.ResponseInputItemUnionParam{OfMessage: msg})
		text.Reset()
		parts, hasData = nil, false
		return nil
	}
	ids := reasoningIDs(m)
	nreasoning := 0
	for _, c := range m.Contents {
		var item responses.ResponseInputItemUnionParam
		switch c := c.(type) {
		case message.Text:
			if c.Text != "" {
				text.WriteString(c.Text)
				parts = append(parts, responses.ResponseInputContentParamOfInputText(c.Text))
			}
			continue
		case message.Data:
			if m.Role != message.RoleUser {
				return nil, fmt.Errorf("data in a %s message: only user messages carry images and files: %w", m.Role, thread.ErrInvalid)
			}
			part, err := responsesDataPart(c)
			if err != nil {
				return nil, err
			}
			parts = append(parts, part)
			hasData = true
			continue
		case message.FunctionCall:
			if m.Role != message.RoleAssistant {
				return nil, fmt.Errorf("function call %q in a %s message: %w", c.CallID, m.Role, thread.ErrInvalid)
			}
			item = responses.ResponseInputItemParamOfFunctionCall(arguments(c.Arguments), c.CallID, c.Name)
		case message.FunctionResult:
			item = responses.ResponseInputItemParamOfFunctionCallOutput(resultText(c))
			item.OfFunctionCallOutput.CallID = param.NewOpt(c.CallID)
		case message.Reasoning:
			n := nreasoning
			nreasoning++
			if m.Role != message.RoleAssistant || ids == nil {
				continue
			}
			ri := &responses.ResponseReasoningItemParam{ID: ids[n], Summary: []responses.ResponseReasoningItemSummaryParam{}}
			if c.Text != "" {
				ri.Summary = append(ri.Summary, responses.ResponseReasoningItemSummaryParam{Text: c.Text})
			}
			if c.Protected != "" {
				ri.EncryptedContent = param.NewOpt(c.Protected)
			}
			item = responses.ResponseInputItemUnionParam{OfReasoning: ri}
		default:
			continue // Usage, Error and Unknown have no place in the API
		}
		if err := flush(); err != nil {
			return nil, err
		}
		out = append(out, item)
	}
	if err := flush(); err != nil {
		return nil, err
	}
	return out, nil
}

// reasoningIDs returns the reasoning item ids a message recorded, or nil if
// it has none or they do not match its Reasoning contents one to one.
func reasoningIDs(m message.Message) []string {
	var ids []string
	switch v := m.Metadata[reasoningIDsKey].(type) {
	case []string:
		ids = slices.Clone(v)
	case []any:
		for _, x := range v {
			s, ok := x.(string)
			if !ok {
				return nil
			}
			ids = append(ids, s)
		}
	default:
		return nil
	}
	n := 0
	for _, c := range m.Contents {
		if _, ok := c.(message.Reasoning); ok {
			n++
		}
	}
	if n != len(ids) || slices.Contains(ids, "") {
		return nil
	}
	return ids
}

// responsesDataPart converts an image to an input_image and any other data
// to an input_file.
func responsesDataPart(d message.Data) (responses.ResponseInputContentUnionParam, error) {
	ref, err := refOf(d)
	if err != nil {
		return responses.ResponseInputContentUnionParam{}, err
	}
	if ref.image() {
		img := &responses.ResponseInputImageParam{Detail: responses.ResponseInputImageDetailAuto}
		if ref.fileID != "" {
			img.FileID = param.NewOpt(ref.fileID)
		} else {
			img.ImageURL = param.NewOpt(ref.asURL())
		}
		return responses.ResponseInputContentUnionParam{OfInputImage: img}, nil
	}
	f := &responses.ResponseInputFileParam{}
	switch {
	case ref.fileID != "":
		f.FileID = param.NewOpt(ref.fileID)
	case ref.url != "":
		f.FileURL = param.NewOpt(ref.url)
	default:
		f.FileData = param.NewOpt(ref.inline)
		f.Filename = param.NewOpt(ref.filename())
	}
	return responses.ResponseInputContentUnionParam{OfInputFile: f}, nil
}

// responsesStream follows a stream's events.
type responsesStream struct {
	callIndex map[int64]int                               // output index of a function_call → call index
	items     map[int64]responses.ResponseOutputItemUnion // finished items by output index
}

// add takes an event and returns the updates it makes, and the final
// response once the stream is over.
func (s *responsesStream) add(ev *responses.ResponseStreamEventUnion) ([]agent.Update, *responses.Response, error) {
	switch ev.Type {
	case "response.output_text.delta", "response.refusal.delta":
		if ev.Delta != "" {
			return []agent.Update{{Text: utf8Valid(ev.Delta)}}, nil, nil
		}
	case "response.reasoning_summary_text.delta", "response.reasoning_text.delta":
		if ev.Delta != "" {
			return []agent.Update{{Reasoning: utf8Valid(ev.Delta)}}, nil, nil
		}
	case "response.reasoning_summary_part.added":
		if ev.SummaryIndex > 0 { // the parts are joined so in the response
			return []agent.Update{{Reasoning: "\n\n"}}, nil, nil
		}
	case "response.output_item.added":
		if ev.Item.Type == "function_call" {
			fc := ev.Item.AsFunctionCall()
			return []agent.Update{{Call: &agent.CallDelta{
				Index: s.call(ev.OutputIndex), CallID: utf8Valid(fc.CallID), Name: utf8Valid(fc.Name), Arguments: utf8Valid(fc.Arguments),
			}}}, nil, nil
		}
	case "response.function_call_arguments.delta":
		if ev.Delta != "" {
			return []agent.Update{{Call: &agent.CallDelta{Index: s.call(ev.OutputIndex), Arguments: utf8Valid(ev.Delta)}}}, nil, nil
		}
	case "response.output_item.done":
		s.items[ev.OutputIndex] = ev.Item
	case "response.completed", "response.incomplete", "response.failed":
		final := ev.Response
		if len(final.Output) == 0 && len(s.items) > 0 {
			// Some servers leave the final response's output empty.
			keys := make([]int64, 0, len(s.items))
			for k := range s.items {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			for _, k := range keys {
				final.Output = append(final.Output, s.items[k])
			}
		}
		return nil, &final, nil
	case "error":
		msg := ev.Message
		if msg == "" {
			msg = "error event without a message"
		}
		return nil, nil, &agent.ProviderError{Provider: provider, Type: ev.Code, Message: msg}
	}
	return nil, nil, nil
}

// call returns the index of the call at an output index, numbering calls in
// the order they start. Output indexes are keys because compatible servers
// do not always give items ids.
func (s *responsesStream) call(outputIndex int64) int {
	if i, ok := s.callIndex[outputIndex]; ok {
		return i
	}
	i := len(s.callIndex)
	s.callIndex[outputIndex] = i
	return i
}
