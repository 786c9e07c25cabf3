package openaiapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/loomthreads/loom/agent"
	"github.com/loomthreads/loom/internal/ids"
	"github.com/loomthreads/loom/internal/oaiitem"
	"github.com/loomthreads/loom/message"
)

// responseBody is the body of POST /responses as a client sends it. Every
// member OpenAI's API reference lists is here, so that an SDK's defaults
// decode; what loom cannot honour is refused by parseResponseRequest with
// a 400 that says so. A member that is not here is an unknown parameter.
type responseBody struct {
	Model              *string           `json:"model"`
	Input              json.RawMessage   `json:"input"`
	Instructions       *string           `json:"instructions"`
	Conversation       json.RawMessage   `json:"conversation"`
	PreviousResponseID *string           `json:"previous_response_id"`
	Store              *bool             `json:"store"`
	Stream             *bool             `json:"stream"`
	StreamOptions      *streamOptions    `json:"stream_options"`
	Tools              []json.RawMessage `json:"tools"`
	ToolChoice         json.RawMessage   `json:"tool_choice"`
	Temperature        *float64          `json:"temperature"`
	TopP               *float64          `json:"top_p"`
	MaxOutputTokens    *int64            `json:"max_output_tokens"`
	MaxToolCalls       *int64            `json:"max_tool_calls"`
	Metadata           json.RawMessage   `json:"metadata"`
	Text               json.RawMessage   `json:"text"`
	ParallelToolCalls  *bool             `json:"parallel_tool_calls"`
	Include            []string          `json:"include"`
	Truncation         *string           `json:"truncation"`
	Reasoning          json.RawMessage   `json:"reasoning"`
	User               *string           `json:"user"`
	SafetyIdentifier   *string           `json:"safety_identifier"`
	PromptCacheKey     *string           `json:"prompt_cache_key"`
	PromptCacheOptions json.RawMessage   `json:"prompt_cache_options"`
	PromptCacheRetain  *string           `json:"prompt_cache_retention"`
	ServiceTier        *string           `json:"service_tier"`
	TopLogprobs        *int64            `json:"top_logprobs"`
	Background         *bool             `json:"background"`
	Prompt             json.RawMessage   `json:"prompt"`
	ContextManagement  json.RawMessage   `json:"context_management"`
	Moderation         json.RawMessage   `json:"moderation"`
	AccessPrograms     json.RawMessage   `json:"access_programs"`
}

type streamOptions struct {
	IncludeObfuscation *bool `json:"include_obfuscation"`
}

// responseRequest is a POST /responses checked and normalized: what the
// model is sent, where the response goes, and the settings the response
// object echoes.
type responseRequest struct {
	model        string
	input        []message.Message
	conversation string // a thread id, or ""
	previous     string // a response id, or ""
	store        bool
	stream       bool
	chat         agent.ChatOptions

	// The settings echoed in the response object, as it shows them.
	settings responseObject
}

// isNull says whether raw is absent or JSON null.
func isNull(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || string(t) == "null"
}

// parseResponseRequest decodes and checks a POST /responses body. Every
// refusal is an *Error with status 400 in OpenAI's shape: nothing that a
// request could hold is found wrong after the model has run, but for what
// needs the store (the conversation, the previous response).
func parseResponseRequest(data []byte, defaultModel string) (*responseRequest, error) {
	var b responseBody
	if err := decodeBytes(data, &b, false); err != nil {
		return nil, err
	}
	req := &responseRequest{store: true}
	set := &req.settings
	set.Object = "response"
	set.Model = defaultModel
	if b.Model != nil && *b.Model != "" {
		set.Model = *b.Model
	}
	if set.Model == "" {
		set.Model = "loom"
	}
	req.model = set.Model

	// What loom does not do.
	switch {
	case b.Background != nil && *b.Background:
		return nil, unsupported("background", "background responses: a response is answered while the request waits (or streamed)")
	case !isNull(b.Prompt):
		return nil, unsupported("prompt", "prompt templates: send instructions and input instead")
	case !isNull(b.ContextManagement) && string(bytes.TrimSpace(b.ContextManagement)) != "[]":
		return nil, unsupported("context_management", "context management: loom keeps the whole conversation")
	case !isNull(b.Moderation):
		return nil, unsupported("moderation", "moderation")
	case !isNull(b.AccessPrograms):
		return nil, unsupported("access_programs", "access programs")
	case b.TopLogprobs != nil && *b.TopLogprobs != 0:
		return nil, unsupported("top_logprobs", "log probabilities: top_logprobs must be 0")
	}
	if b.Stream != nil {
		req.stream = *b.Stream
	}
	if b.StreamOptions != nil && !req.stream {
		return nil, invalidParam("stream_options", "stream_options is only allowed when stream is true.")
	}
	if b.Store != nil {
		req.store = *b.Store
	}
	set.Store = req.store

	// Where the response goes.
	if !isNull(b.Conversation) {
		id, err := conversationParam(b.Conversation)
		if err != nil {
			return nil, err
		}
		req.conversation = id
		set.Conversation = &conversationRef{ID: id}
	}
	if b.PreviousResponseID != nil && *b.PreviousResponseID != "" {
		if req.conversation != "" {
			return nil, invalidParam("previous_response_id", "Parameters 'conversation' and 'previous_response_id' cannot be used together: a response continues a conversation or an earlier response, not both.")
		}
		if _, _, ok := parseResponseID(*b.PreviousResponseID); !ok {
			return nil, invalidParam("previous_response_id", "Invalid 'previous_response_id': '%s'. Expected an ID that begins with 'resp_', as loom gives them.", clip(*b.PreviousResponseID))
		}
		req.previous = *b.PreviousResponseID
		set.PreviousResponseID = &req.previous
	}

	// The input.
	if !isNull(b.Input) {
		if err := refuseReferences(b.Input); err != nil {
			return nil, err
		}
		msgs, err := oaiitem.Input(b.Input)
		if err != nil {
			return nil, itemError(err)
		}
		for i, m := range msgs {
			if err := m.Validate(); err != nil {
				return nil, invalidParam(fmt.Sprintf("input[%d]", i), "Invalid input item: %v.", err)
			}
		}
		req.input = msgs
	}
	if len(req.input) == 0 && req.conversation == "" && req.previous == "" {
		return nil, invalidParam("input", "Missing required parameter: 'input' (a string or an array of items), unless the response continues a conversation or a previous response.")
	}

	// The model's settings.
	if b.Instructions != nil {
		if !utf8.ValidString(*b.Instructions) {
			return nil, invalidParam("instructions", "Invalid 'instructions': not UTF-8.")
		}
		req.chat.Instructions = *b.Instructions
		set.Instructions = b.Instructions
	}
	set.Tools = []json.RawMessage{}
	for i, raw := range b.Tools {
		spec, norm, err := functionTool(i, raw)
		if err != nil {
			return nil, err
		}
		req.chat.Tools = append(req.chat.Tools, spec)
		set.Tools = append(set.Tools, norm)
	}
	choice, echo, err := toolChoice(b.ToolChoice, req.chat.Tools)
	if err != nil {
		return nil, err
	}
	req.chat.ToolChoice, set.ToolChoice = choice, echo
	if t := b.Temperature; t != nil {
		if *t < 0 || *t > 2 {
			return nil, invalidParam("temperature", "Invalid 'temperature': %g. Expected a value between 0 and 2.", *t)
		}
		req.chat.Temperature = t
	}
	set.Temperature = 1
	if b.Temperature != nil {
		set.Temperature = *b.Temperature
	}
	set.TopP = 1
	if p := b.TopP; p != nil {
		if *p < 0 || *p > 1 {
			return nil, invalidParam("top_p", "Invalid 'top_p': %g. Expected a value between 0 and 1.", *p)
		}
		set.TopP = *p
	}
	if n := b.MaxOutputTokens; n != nil {
		if *n < 16 || *n > 1<<31-1 {
			return nil, invalidParam("max_output_tokens", "Invalid 'max_output_tokens': integer below minimum value. Expected a value >= 16, but got %d instead.", *n)
		}
		req.chat.MaxTokens = int(*n)
		set.MaxOutputTokens = n
	}
	if n := b.MaxToolCalls; n != nil {
		if *n < 1 {
			return nil, invalidParam("max_tool_calls", "Invalid 'max_tool_calls': %d. Expected a value >= 1.", *n)
		}
		set.MaxToolCalls = n
	}
	md, err := parseMetadata(b.Metadata)
	if err != nil {
		return nil, err
	}
	set.Metadata = md
	text, format, err := textConfig(b.Text)
	if err != nil {
		return nil, err
	}
	req.chat.ResponseFormat, set.Text = format, text
	set.ParallelToolCalls = true
	if b.ParallelToolCalls != nil {
		set.ParallelToolCalls = *b.ParallelToolCalls
	}
	for i, inc := range b.Include {
		if !slices.Contains(knownIncludes, inc) {
			return nil, invalidParam(fmt.Sprintf("include[%d]", i), "Invalid value: '%s'. Supported values are: %s.", clip(inc), quoteAll(knownIncludes))
		}
	}
	set.Truncation = "disabled"
	if t := b.Truncation; t != nil {
		if *t != "disabled" && *t != "auto" {
			return nil, invalidParam("truncation", "Invalid value: '%s'. Supported values are: 'auto' and 'disabled'.", clip(*t))
		}
		set.Truncation = *t
	}
	reasoning, err := reasoningConfig(b.Reasoning)
	if err != nil {
		return nil, err
	}
	set.Reasoning = reasoning
	set.ServiceTier = "default"
	if t := b.ServiceTier; t != nil {
		if !slices.Contains([]string{"auto", "default", "flex", "scale", "priority", "fast", "ultrafast"}, *t) {
			return nil, invalidParam("service_tier", "Invalid value: '%s'. Supported values are: 'auto', 'default', 'flex', 'scale', 'priority', 'fast' and 'ultrafast'.", clip(*t))
		}
	}
	if b.PromptCacheRetain != nil && *b.PromptCacheRetain != "in_memory" && *b.PromptCacheRetain != "24h" {
		return nil, invalidParam("prompt_cache_retention", "Invalid value: '%s'. Supported values are: 'in_memory' and '24h'.", clip(*b.PromptCacheRetain))
	}
	if !isNull(b.PromptCacheOptions) && bytes.TrimSpace(b.PromptCacheOptions)[0] != '{' {
		return nil, invalidParam("prompt_cache_options", "Invalid 'prompt_cache_options': expected an object.")
	}
	for _, f := range []struct {
		name string
		v    *string
		dst  **string
	}{{"user", b.User, &set.User}, {"safety_identifier", b.SafetyIdentifier, &set.SafetyIdentifier}, {"prompt_cache_key", b.PromptCacheKey, &set.PromptCacheKey}} {
		if f.v == nil {
			continue
		}
		if len(*f.v) > 512 || !utf8.ValidString(*f.v) {
			return nil, invalidParam(f.name, "Invalid '%s': a string of at most 512 characters.", f.name)
		}
		*f.dst = f.v
	}
	return req, nil
}

// conversationParam reads `conversation`: an id, or {"id": id}.
func conversationParam(raw json.RawMessage) (string, error) {
	var id string
	if err := json.Unmarshal(raw, &id); err != nil {
		var obj struct {
			ID string `json:"id"`
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&obj); err != nil {
			return "", invalidParam("conversation", "Invalid 'conversation': expected a conversation id or an object {\"id\": \"conv_…\"}.")
		}
		id = obj.ID
	}
	if !ids.Valid(id) {
		return "", invalidParam("conversation", "Invalid 'conversation': '%s' is not a conversation id.", clip(id))
	}
	return id, nil
}

// refuseReferences refuses input items of type item_reference: loom would
// have to look the item up across threads, which it does not do.
func refuseReferences(input json.RawMessage) error {
	var items []map[string]json.RawMessage
	if json.Unmarshal(input, &items) != nil {
		return nil // a string, or a shape Input explains
	}
	for i, it := range items {
		// A reference may leave its type out: it is then an id alone.
		_, typed := it["type"]
		_, role := it["role"]
		_, id := it["id"]
		if string(it["type"]) == `"item_reference"` || !typed && !role && id {
			return unsupported(fmt.Sprintf("input[%d]", i), "item references: send the item itself, or continue with previous_response_id or conversation")
		}
	}
	return nil
}

// functionTool reads tools[i]: a function tool, the only kind loom offers
// a model (it runs no hosted tools). It returns the spec the model is sent
// and the tool as the response object shows it.
func functionTool(i int, raw json.RawMessage) (agent.ToolSpec, json.RawMessage, error) {
	p := fmt.Sprintf("tools[%d]", i)
	var t struct {
		Type           string          `json:"type"`
		Name           string          `json:"name"`
		Description    *string         `json:"description"`
		Parameters     json.RawMessage `json:"parameters"`
		Strict         *bool           `json:"strict"`
		Async          *bool           `json:"async"`
		DeferLoading   *bool           `json:"defer_loading"`
		AllowedCallers []string        `json:"allowed_callers"`
		OutputSchema   json.RawMessage `json:"output_schema"`
	}
	var head struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		return agent.ToolSpec{}, nil, invalidParam(p, "Invalid '%s': expected an object with a 'type'.", p)
	}
	if head.Type != "function" {
		if head.Type == "" {
			return agent.ToolSpec{}, nil, invalidParam(p+".type", "Missing required parameter: '%s.type'.", p)
		}
		return agent.ToolSpec{}, nil, unsupported(p+".type", "hosted tools ('%s'): loom runs no tools itself; give function tools, and run them when the model calls them", clip(head.Type))
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&t); err != nil {
		var unknown string
		if _, e := fmt.Sscanf(err.Error(), "json: unknown field %q", &unknown); e == nil {
			return agent.ToolSpec{}, nil, invalidParam(p+"."+unknown, "Unknown parameter: '%s.%s'.", p, clip(unknown))
		}
		return agent.ToolSpec{}, nil, invalidParam(p, "Invalid '%s': %v.", p, err)
	}
	if !validToolName(t.Name) {
		return agent.ToolSpec{}, nil, invalidParam(p+".name", "Invalid '%s.name': '%s'. Expected a string of 1 to 64 letters, digits, underscores or dashes.", p, clip(t.Name))
	}
	spec := agent.ToolSpec{Name: t.Name}
	if t.Description != nil {
		spec.Description = *t.Description
	}
	if !isNull(t.Parameters) {
		if bytes.TrimSpace(t.Parameters)[0] != '{' {
			return agent.ToolSpec{}, nil, invalidParam(p+".parameters", "Invalid '%s.parameters': expected a JSON Schema object.", p)
		}
		spec.Parameters = bytes.Clone(t.Parameters)
	}
	strict := true // OpenAI's default for function tools
	if t.Strict != nil {
		strict = *t.Strict
	}
	norm := map[string]any{"type": "function", "name": t.Name, "description": t.Description, "parameters": json.RawMessage("null"), "strict": strict}
	if spec.Parameters != nil {
		norm["parameters"] = spec.Parameters
	}
	data, _ := json.Marshal(norm)
	return spec, data, nil
}

func validToolName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// toolChoice reads tool_choice: "auto", "none", "required", or
// {"type":"function","name":…} naming one of tools. It returns the choice
// the model is sent and the one the response object shows.
func toolChoice(raw json.RawMessage, tools []agent.ToolSpec) (agent.ToolChoice, json.RawMessage, error) {
	if isNull(raw) {
		return "", json.RawMessage(`"auto"`), nil
	}
	var mode string
	if json.Unmarshal(raw, &mode) == nil {
		switch mode {
		case "required":
			if len(tools) == 0 {
				return "", nil, invalidParam("tool_choice", "Tool choice 'required' must be specified with 'tools' parameter.")
			}
			fallthrough
		case "auto", "none":
			return agent.ToolChoice(mode), json.RawMessage(strings.TrimSpace(string(raw))), nil
		}
		return "", nil, invalidParam("tool_choice", "Invalid value: '%s'. Supported values are: 'none', 'auto' and 'required'.", clip(mode))
	}
	var obj struct {
		Type string `json:"type"`
		Name string `json:"name"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil {
		return "", nil, invalidParam("tool_choice", "Invalid 'tool_choice': expected a string or an object.")
	}
	if obj.Type != "function" {
		return "", nil, unsupported("tool_choice", "tool_choice of type '%s': loom offers function tools only", clip(obj.Type))
	}
	if !slices.ContainsFunc(tools, func(t agent.ToolSpec) bool { return t.Name == obj.Name }) {
		return "", nil, invalidParam("tool_choice", "Tool choice '%s' not found in 'tools' parameter.", clip(obj.Name))
	}
	echo, _ := json.Marshal(map[string]string{"type": "function", "name": obj.Name})
	return agent.ToolChoice(obj.Name), echo, nil
}

// textConfig reads `text`: its format (text, json_object or json_schema)
// and verbosity. It returns the config the response object shows and the
// format the model is asked for (nil: text).
func textConfig(raw json.RawMessage) (json.RawMessage, *agent.ResponseFormat, error) {
	def := json.RawMessage(`{"format":{"type":"text"},"verbosity":"medium"}`)
	if isNull(raw) {
		return def, nil, nil
	}
	var t struct {
		Format *struct {
			Type        string          `json:"type"`
			Name        string          `json:"name"`
			Schema      json.RawMessage `json:"schema"`
			Description *string         `json:"description"`
			Strict      *bool           `json:"strict"`
		} `json:"format"`
		Verbosity *string `json:"verbosity"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&t); err != nil {
		return nil, nil, invalidParam("text", "Invalid 'text': %v.", err)
	}
	out := map[string]any{"format": map[string]any{"type": "text"}, "verbosity": "medium"}
	if v := t.Verbosity; v != nil {
		if *v != "low" && *v != "medium" && *v != "high" {
			return nil, nil, invalidParam("text.verbosity", "Invalid value: '%s'. Supported values are: 'low', 'medium' and 'high'.", clip(*v))
		}
		out["verbosity"] = *v
	}
	var rf *agent.ResponseFormat
	if f := t.Format; f != nil {
		switch f.Type {
		case "text":
		case "json_object":
			rf = &agent.ResponseFormat{}
			out["format"] = map[string]any{"type": "json_object"}
		case "json_schema":
			if f.Name == "" || len(f.Name) > 64 {
				return nil, nil, invalidParam("text.format.name", "Missing required parameter: 'text.format.name'.")
			}
			if isNull(f.Schema) || bytes.TrimSpace(f.Schema)[0] != '{' {
				return nil, nil, invalidParam("text.format.schema", "Missing required parameter: 'text.format.schema' (a JSON Schema object).")
			}
			rf = &agent.ResponseFormat{Name: f.Name, Schema: bytes.Clone(f.Schema), Strict: f.Strict != nil && *f.Strict}
			format := map[string]any{"type": "json_schema", "name": f.Name, "schema": rf.Schema, "strict": rf.Strict}
			if f.Description != nil {
				format["description"] = *f.Description
			}
			out["format"] = format
		default:
			return nil, nil, invalidParam("text.format.type", "Invalid value: '%s'. Supported values are: 'text', 'json_object' and 'json_schema'.", clip(f.Type))
		}
	}
	data, err := json.Marshal(out)
	if err != nil {
		return nil, nil, invalidParam("text", "Invalid 'text': %v.", err)
	}
	return data, rf, nil
}

// reasoningConfig reads `reasoning`, which loom passes on to no model: it
// is checked and shown back.
func reasoningConfig(raw json.RawMessage) (json.RawMessage, error) {
	if isNull(raw) {
		return json.RawMessage(`{"effort":null,"summary":null}`), nil
	}
	var r struct {
		Effort          *string `json:"effort"`
		Summary         *string `json:"summary"`
		GenerateSummary *string `json:"generate_summary"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return nil, invalidParam("reasoning", "Invalid 'reasoning': %v.", err)
	}
	if r.Summary == nil {
		r.Summary = r.GenerateSummary
	}
	data, _ := json.Marshal(map[string]*string{"effort": r.Effort, "summary": r.Summary})
	return data, nil
}

func quoteAll(vs []string) string {
	q := make([]string, len(vs))
	for i, v := range vs {
		q[i] = "'" + v + "'"
	}
	return strings.Join(q, ", ")
}
