package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"strings"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/packages/respjson"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/shared"

	"github.com/loomthreads/loom/agent"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

// Chat is a chat client on the Chat Completions API: OpenAI's, or that of
// any server that speaks it (Ollama, vLLM, llama.cpp, LM Studio…). The
// service keeps nothing, so every request carries the whole conversation.
//
// Reasoning contents are not sent, as the API has no place for them; the
// reasoning that compatible servers return in a message's
// "reasoning_content" or "reasoning" field is read into a message.Reasoning.
// ChatOptions.Metadata is not sent either: the API keeps metadata only for
// stored completions, and this client never stores.
type Chat struct {
	client sdk.Client
	model  string
}

var _ agent.ChatClient = (*Chat)(nil)

// NewChat returns a Chat Completions client. It makes no request.
func NewChat(opts Options) *Chat {
	return &Chat{client: newClient(opts), model: opts.Model}
}

// Capabilities reports streaming and tools, and no service threads: a
// completion is not a conversation the API can continue.
func (c *Chat) Capabilities() agent.Capabilities {
	return agent.Capabilities{Streaming: true, Tools: true}
}

// Response sends msgs and returns the model's whole response.
func (c *Chat) Response(ctx context.Context, msgs []message.Message, opts *agent.ChatOptions) (*agent.ChatResponse, error) {
	params, err := c.params(msgs, opts)
	if err != nil {
		return nil, err
	}
	var raw *http.Response
	completion, err := c.client.Chat.Completions.New(ctx, params, option.WithResponseInto(&raw))
	if err != nil {
		return nil, wrapError(ctx, err, raw)
	}
	if completion != nil {
		// Some compatible servers report errors with status 200.
		if f, ok := completion.JSON.ExtraFields["error"]; ok {
			if err := eventError([]byte(`{"error":` + f.Raw() + `}`)); err != nil {
				return nil, err
			}
		}
	}
	return chatTurnOf(completion).response()
}

// Stream sends msgs and yields text, reasoning, tool-call and usage deltas as
// they arrive, then the whole response. A server that answers a streamed
// request with a plain JSON body is replayed as if it had streamed.
func (c *Chat) Stream(ctx context.Context, msgs []message.Message, opts *agent.ChatOptions) iter.Seq2[agent.Update, error] {
	return func(yield func(agent.Update, error) bool) {
		params, err := c.params(msgs, opts)
		if err != nil {
			yield(agent.Update{}, err)
			return
		}
		params.StreamOptions = sdk.ChatCompletionStreamOptionsParam{IncludeUsage: param.NewOpt(true)}
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		var raw *http.Response
		_, err = c.client.Chat.Completions.New(ctx, params,
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
			var completion sdk.ChatCompletion
			if err := decodeJSON(raw, &completion); err != nil {
				yield(agent.Update{}, readError(ctx, err))
				return
			}
			resp, err := chatTurnOf(&completion).response()
			replay(yield, resp, err)
			return
		}

		s := chatStream{slots: map[int64]int{}}
		dec := ssestream.NewDecoder(raw)
		done := false
		for !done && dec.Next() {
			data := bytes.TrimSpace(dec.Event().Data)
			switch {
			case len(data) == 0:
				continue
			case bytes.Equal(data, []byte("[DONE]")):
				done = true
				continue
			}
			if err := eventError(data); err != nil {
				yield(agent.Update{}, err)
				return
			}
			var chunk sdk.ChatCompletionChunk
			if err := json.Unmarshal(data, &chunk); err != nil {
				yield(agent.Update{}, fmt.Errorf("openai: stream: %w", err))
				return
			}
			for _, u := range s.add(&chunk) {
				if !yield(u, nil) {
					return
				}
			}
		}
		// Servers that never send [DONE] end cleanly after the finish
		// reason; any other end is a stream cut short.
		if !done && (dec.Err() != nil || s.finish == "") {
			yield(agent.Update{}, readError(ctx, dec.Err()))
			return
		}
		resp, err := s.turn().response()
		if err != nil {
			yield(agent.Update{}, err)
			return
		}
		yield(agent.Update{Response: resp}, nil)
	}
}

// params builds the request, refusing before any request what the API
// cannot do.
func (c *Chat) params(msgs []message.Message, opts *agent.ChatOptions) (sdk.ChatCompletionNewParams, error) {
	var p sdk.ChatCompletionNewParams
	if opts == nil {
		opts = &agent.ChatOptions{}
	}
	if opts.ConversationID != "" || (opts.Store != nil && *opts.Store) {
		return p, fmt.Errorf("openai: the Chat Completions API keeps no conversations (use NewResponses): %w", thread.ErrUnsupported)
	}
	mdl, err := model(c.model, opts)
	if err != nil {
		return p, err
	}
	wire, err := chatMessages(opts.Instructions, msgs)
	if err != nil {
		return p, err
	}
	p.Model = mdl
	p.Messages = wire
	for _, t := range opts.Tools {
		fd := shared.FunctionDefinitionParam{Name: t.Name}
		if t.Description != "" {
			fd.Description = param.NewOpt(t.Description)
		}
		schema, err := rawSchema(t.Parameters, "tool "+t.Name)
		if err != nil {
			return p, err
		}
		if schema != nil {
			// Set raw so the schema goes out as written, key order and
			// numbers included; the SDK's map would reorder it.
			fd.SetExtraFields(map[string]any{"parameters": schema})
		}
		p.Tools = append(p.Tools, sdk.ChatCompletionFunctionTool(fd))
	}
	switch tc := opts.ToolChoice; tc {
	case "":
	case agent.ToolAuto, agent.ToolNone, agent.ToolRequired:
		p.ToolChoice = sdk.ChatCompletionToolChoiceOptionUnionParam{OfAuto: param.NewOpt(string(tc))}
	default:
		p.ToolChoice = sdk.ToolChoiceOptionFunctionToolChoice(sdk.ChatCompletionNamedToolChoiceFunctionParam{Name: string(tc)})
	}
	if opts.Temperature != nil {
		p.Temperature = param.NewOpt(*opts.Temperature)
	}
	if opts.MaxTokens != 0 {
		p.MaxCompletionTokens = param.NewOpt(int64(opts.MaxTokens))
	}
	if rf := opts.ResponseFormat; rf != nil {
		schema, err := rawSchema(rf.Schema, "response format")
		if err != nil {
			return p, err
		}
		if schema == nil {
			p.ResponseFormat = sdk.ChatCompletionNewParamsResponseFormatUnion{OfJSONObject: &shared.ResponseFormatJSONObjectParam{}}
		} else {
			p.ResponseFormat = sdk.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
				JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{
					Name:   schemaName(rf.Name),
					Schema: schema,
					Strict: param.NewOpt(rf.Strict),
				},
			}}
		}
	}
	return p, nil
}

// rawSchema checks a JSON Schema; nil means none was given.
func rawSchema(s json.RawMessage, what string) (json.RawMessage, error) {
	t := bytes.TrimSpace(s)
	if len(t) == 0 || bytes.Equal(t, []byte("null")) {
		return nil, nil
	}
	if !json.Valid(t) {
		return nil, fmt.Errorf("openai: %s: schema is not valid JSON: %w", what, thread.ErrInvalid)
	}
	return t, nil
}

// schemaName is the name OpenAI requires of a response schema.
func schemaName(name string) string {
	if name == "" {
		return "response"
	}
	return name
}

// chatMessages converts a conversation, instructions first.
func chatMessages(instructions string, msgs []message.Message) ([]sdk.ChatCompletionMessageParamUnion, error) {
	var out []sdk.ChatCompletionMessageParamUnion
	if instructions != "" {
		out = append(out, sdk.SystemMessage(instructions))
	}
	for i, m := range msgs {
		wire, err := chatMessage(m)
		if err != nil {
			return nil, fmt.Errorf("openai: message %d (%s): %w", i, m.Role, err)
		}
		out = append(out, wire...)
	}
	return out, nil
}

// chatMessage converts one message. Its function results become tool
// messages that come first, since the API wants them right after the
// assistant message that made the calls.
func chatMessage(m message.Message) ([]sdk.ChatCompletionMessageParamUnion, error) {
	var (
		out     []sdk.ChatCompletionMessageParamUnion
		text    strings.Builder
		parts   []sdk.ChatCompletionContentPartUnionParam
		hasData bool
		calls   []sdk.ChatCompletionMessageToolCallUnionParam
	)
	for _, c := range m.Contents {
		switch c := c.(type) {
		case message.FunctionResult:
			out = append(out, sdk.ToolMessage(resultText(c), c.CallID))
		case message.Text:
			if c.Text == "" {
				continue
			}
			text.WriteString(c.Text)
			parts = append(parts, sdk.TextContentPart(c.Text))
		case message.Data:
			if m.Role != message.RoleUser {
				return nil, fmt.Errorf("data in a %s message: only user messages carry images and files: %w", m.Role, thread.ErrInvalid)
			}
			part, err := chatDataPart(c)
			if err != nil {
				return nil, err
			}
			parts = append(parts, part)
			hasData = true
		case message.FunctionCall:
			if m.Role != message.RoleAssistant {
				return nil, fmt.Errorf("function call %q in a %s message: %w", c.CallID, m.Role, thread.ErrInvalid)
			}
			calls = append(calls, sdk.ChatCompletionMessageToolCallUnionParam{OfFunction: &sdk.ChatCompletionMessageFunctionToolCallParam{
				ID:       c.CallID,
				Function: sdk.ChatCompletionMessageFunctionToolCallFunctionParam{Name: c.Name, Arguments: arguments(c.Arguments)},
			}})
		}
		// Reasoning, Usage, Error and Unknown have no place in the API.
	}
	var name param.Opt[string]
	if m.AuthorName != "" {
		name = param.NewOpt(m.AuthorName)
	}
	switch m.Role {
	case message.RoleSystem, "developer":
		if text.Len() == 0 {
			break
		}
		content := sdk.ChatCompletionSystemMessageParamContentUnion{OfString: param.NewOpt(text.String())}
		if m.Role == "developer" {
			out = append(out, sdk.ChatCompletionMessageParamUnion{OfDeveloper: &sdk.ChatCompletionDeveloperMessageParam{
				Content: sdk.ChatCompletionDeveloperMessageParamContentUnion{OfString: content.OfString}, Name: name}})
		} else {
			out = append(out, sdk.ChatCompletionMessageParamUnion{OfSystem: &sdk.ChatCompletionSystemMessageParam{Content: content, Name: name}})
		}
	case message.RoleUser:
		if len(parts) == 0 {
			break
		}
		var content sdk.ChatCompletionUserMessageParamContentUnion
		if hasData {
			content.OfArrayOfContentParts = parts
		} else {
			content.OfString = param.NewOpt(text.String())
		}
		out = append(out, sdk.ChatCompletionMessageParamUnion{OfUser: &sdk.ChatCompletionUserMessageParam{Content: content, Name: name}})
	case message.RoleAssistant:
		if text.Len() == 0 && len(calls) == 0 {
			break
		}
		a := &sdk.ChatCompletionAssistantMessageParam{ToolCalls: calls, Name: name}
		if text.Len() > 0 {
			a.Content.OfString = param.NewOpt(text.String())
		}
		out = append(out, sdk.ChatCompletionMessageParamUnion{OfAssistant: a})
	case message.RoleTool:
		if text.Len() > 0 {
			return nil, fmt.Errorf("tool message with text outside a function result: %w", thread.ErrInvalid)
		}
	default:
		if text.Len() > 0 || len(parts) > 0 {
			return nil, fmt.Errorf("role %q is not one the API knows: %w", m.Role, thread.ErrInvalid)
		}
	}
	return out, nil
}

// chatDataPart converts an image to an image part and any other data to a
// file part. The API takes files only inline or by file id, and images only
// by URL.
func chatDataPart(d message.Data) (sdk.ChatCompletionContentPartUnionParam, error) {
	ref, err := refOf(d)
	if err != nil {
		return sdk.ChatCompletionContentPartUnionParam{}, err
	}
	if ref.image() {
		if ref.fileID != "" {
			return sdk.ChatCompletionContentPartUnionParam{}, fmt.Errorf("image %q: the Chat Completions API takes images by URL, not file id: %w", d.Name, thread.ErrInvalid)
		}
		return sdk.ImageContentPart(sdk.ChatCompletionContentPartImageImageURLParam{URL: ref.asURL()}), nil
	}
	var f sdk.ChatCompletionContentPartFileFileParam
	switch {
	case ref.fileID != "":
		f.FileID = param.NewOpt(ref.fileID)
	case ref.inline != "":
		f.FileData = param.NewOpt(ref.inline)
		f.Filename = param.NewOpt(ref.filename())
	default:
		return sdk.ChatCompletionContentPartUnionParam{}, fmt.Errorf("file %q (%s): the Chat Completions API takes files inline or by file id, not by URL: %w", d.Name, ref.mediaType, thread.ErrInvalid)
	}
	return sdk.FileContentPart(f), nil
}

// chatTurn is a completion's first choice, whether read whole or assembled
// from a stream, so that both give the same response.
type chatTurn struct {
	id, model string
	choice    bool // the completion had a choice
	reasoning string
	text      string
	calls     []message.FunctionCall
	finish    string
	usage     message.Usage
}

func chatTurnOf(c *sdk.ChatCompletion) *chatTurn {
	if c == nil { // the body was JSON null
		return &chatTurn{}
	}
	t := &chatTurn{id: c.ID, model: c.Model, usage: chatUsage(c.Usage)}
	if len(c.Choices) == 0 {
		return t
	}
	ch := c.Choices[0]
	t.choice = true
	t.finish = ch.FinishReason
	t.reasoning = reasoningOf(ch.Message.JSON.ExtraFields)
	t.text = ch.Message.Content + ch.Message.Refusal
	for _, tc := range ch.Message.ToolCalls {
		if tc.Type != "" && tc.Type != "function" {
			continue // custom tools are never sent, so never called
		}
		t.calls = append(t.calls, message.FunctionCall{CallID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
	}
	return t
}

func (t *chatTurn) response() (*agent.ChatResponse, error) {
	if !t.choice {
		return nil, errors.New("openai: response has no choices")
	}
	if err := checkCalls(t.calls); err != nil {
		return nil, err
	}
	var contents []message.Content
	if t.reasoning != "" {
		contents = append(contents, message.Reasoning{Text: t.reasoning})
	}
	contents = append(contents, message.Text{Text: t.text})
	for _, c := range t.calls {
		c.CallID = callID(c.CallID)
		contents = append(contents, c)
	}
	return &agent.ChatResponse{
		Messages:     []message.Message{assistant(contents, nil)},
		ResponseID:   t.id,
		Model:        t.model,
		Usage:        t.usage,
		FinishReason: finish(t.finish, len(t.calls) > 0),
	}, nil
}

func chatUsage(u sdk.CompletionUsage) message.Usage {
	total := u.TotalTokens
	if total == 0 {
		total = u.PromptTokens + u.CompletionTokens
	}
	return message.Usage{
		InputTokens:       u.PromptTokens,
		OutputTokens:      u.CompletionTokens,
		TotalTokens:       total,
		CachedInputTokens: u.PromptTokensDetails.CachedTokens,
		ReasoningTokens:   u.CompletionTokensDetails.ReasoningTokens,
	}
}

// reasoningOf reads the reasoning that compatible servers add to a message
// or delta: "reasoning_content" (vLLM, llama.cpp, DeepSeek) or "reasoning"
// (Ollama, OpenRouter).
func reasoningOf(extra map[string]respjson.Field) string {
	for _, k := range []string{"reasoning_content", "reasoning"} {
		var s string
		if f, ok := extra[k]; ok && json.Unmarshal([]byte(f.Raw()), &s) == nil && s != "" {
			return s
		}
	}
	return ""
}

// chatStream assembles a streamed completion's first choice.
type chatStream struct {
	id, model string
	choice    bool
	reasoning strings.Builder
	text      strings.Builder
	calls     []message.FunctionCall
	slots     map[int64]int // the wire's call index → index in calls
	finish    string
	usage     message.Usage
}

// add takes a chunk and returns the updates it makes.
func (s *chatStream) add(ch *sdk.ChatCompletionChunk) []agent.Update {
	var ups []agent.Update
	if s.id == "" {
		s.id = ch.ID
	}
	if s.model == "" {
		s.model = ch.Model
	}
	for _, choice := range ch.Choices {
		if choice.Index != 0 {
			continue
		}
		s.choice = true
		d := choice.Delta
		if r := utf8Valid(reasoningOf(d.JSON.ExtraFields)); r != "" {
			s.reasoning.WriteString(r)
			ups = append(ups, agent.Update{Reasoning: r})
		}
		if t := utf8Valid(d.Content + d.Refusal); t != "" {
			s.text.WriteString(t)
			ups = append(ups, agent.Update{Text: t})
		}
		for _, tc := range d.ToolCalls {
			ups = append(ups, agent.Update{Call: s.addCall(tc)})
		}
		if choice.FinishReason != "" {
			s.finish = choice.FinishReason
		}
	}
	if ch.JSON.Usage.Valid() {
		s.usage = chatUsage(ch.Usage)
		u := s.usage
		ups = append(ups, agent.Update{Usage: &u})
	}
	return ups
}

// addCall adds a piece of a call. A piece with a new id at a known index is
// a new call: some servers send each whole call at index 0.
func (s *chatStream) addCall(tc sdk.ChatCompletionChunkChoiceDeltaToolCall) *agent.CallDelta {
	slot, ok := s.slots[tc.Index]
	if !ok || (tc.ID != "" && s.calls[slot].CallID != "" && tc.ID != s.calls[slot].CallID) {
		slot = len(s.calls)
		s.calls = append(s.calls, message.FunctionCall{})
		s.slots[tc.Index] = slot
	}
	call := &s.calls[slot]
	delta := &agent.CallDelta{Index: slot, Arguments: utf8Valid(tc.Function.Arguments)}
	if call.CallID == "" && tc.ID != "" {
		call.CallID = utf8Valid(tc.ID)
		delta.CallID = call.CallID
	}
	if call.Name == "" && tc.Function.Name != "" {
		call.Name = utf8Valid(tc.Function.Name)
		delta.Name = call.Name
	}
	call.Arguments += delta.Arguments
	return delta
}

func (s *chatStream) turn() *chatTurn {
	return &chatTurn{
		id:        s.id,
		model:     s.model,
		choice:    s.choice,
		reasoning: s.reasoning.String(),
		text:      s.text.String(),
		calls:     s.calls,
		finish:    s.finish,
		usage:     s.usage,
	}
}
