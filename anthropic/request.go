package anthropic

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"mime"
	"net/url"
	"path"
	"strings"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/packages/param"

	"github.com/loomthreads/loom/agent"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

// redactedPrefix marks a Reasoning made from a redacted_thinking block: its
// Protected is the prefix and the block's data. A thinking block can have no
// text as well (thinking display "omitted"), so an empty Text cannot tell
// the two apart; the prefix can, since a colon never occurs in the base64
// of a signature.
const redactedPrefix = "redacted_thinking:"

var errNoModel = fmt.Errorf("anthropic: no model: set Options.Model or ChatOptions.Model: %w", thread.ErrInvalid)

// params builds the request for msgs and opts, or says why there can be
// none, before anything is sent.
func (c *Client) params(msgs []message.Message, opts *agent.ChatOptions) (anthropic.MessageNewParams, error) {
	var p anthropic.MessageNewParams
	if opts == nil {
		opts = &agent.ChatOptions{}
	}
	if opts.ConversationID != "" || (opts.Store != nil && *opts.Store) {
		return p, fmt.Errorf("anthropic: %w", agent.ErrServiceThreads)
	}

	p.Model = anthropic.Model(c.model)
	if opts.Model != "" {
		p.Model = anthropic.Model(opts.Model)
	}
	if p.Model == "" {
		return p, errNoModel
	}

	switch {
	case opts.MaxTokens > 0:
		p.MaxTokens = int64(opts.MaxTokens)
	case opts.MaxTokens < 0:
		return p, fmt.Errorf("anthropic: max tokens %d: %w", opts.MaxTokens, thread.ErrInvalid)
	default:
		p.MaxTokens = c.maxTokens
	}
	if opts.Temperature != nil {
		p.Temperature = param.NewOpt(*opts.Temperature)
	}
	if id := opts.Metadata["user_id"]; id != "" {
		p.Metadata.UserID = param.NewOpt(id)
	}

	if opts.Instructions != "" {
		p.System = append(p.System, anthropic.TextBlockParam{Text: opts.Instructions})
	}
	system, turns, err := convertMessages(msgs)
	if err != nil {
		return p, err
	}
	p.System = append(p.System, system...)
	p.Messages = turns

	if err := setTools(&p, opts); err != nil {
		return p, err
	}
	if rf := opts.ResponseFormat; rf != nil {
		if rf.Schema == nil {
			return p, fmt.Errorf("anthropic: JSON output without a schema: %w", thread.ErrUnsupported)
		}
		schema, err := compactObject(rf.Schema)
		if err != nil {
			return p, fmt.Errorf("anthropic: response format schema: %w", err)
		}
		// Override keeps the schema's member order, which a map would
		// lose and which the model follows when it writes the object.
		raw := fmt.Appendf(nil, `{"type":"json_schema","schema":%s}`, schema)
		p.OutputConfig.Format = param.Override[anthropic.JSONOutputFormatParam](json.RawMessage(raw))
	}
	return p, nil
}

// setTools sets the tools and the tool choice of p.
func setTools(p *anthropic.MessageNewParams, opts *agent.ChatOptions) error {
	names := make(map[string]bool, len(opts.Tools))
	for _, t := range opts.Tools {
		schema, err := toolSchema(t.Parameters)
		if err != nil {
			return fmt.Errorf("anthropic: tool %q: %w", t.Name, err)
		}
		tp := anthropic.ToolParam{
			Name:        t.Name,
			InputSchema: param.Override[anthropic.ToolInputSchemaParam](json.RawMessage(schema)),
		}
		if t.Description != "" {
			tp.Description = param.NewOpt(t.Description)
		}
		p.Tools = append(p.Tools, anthropic.ToolUnionParam{OfTool: &tp})
		names[t.Name] = true
	}
	// Anthropic refuses a tool_choice without tools, and without tools
	// every choice means the same: no calls.
	if len(opts.Tools) == 0 {
		return nil
	}
	switch opts.ToolChoice {
	case "":
	case agent.ToolAuto:
		p.ToolChoice.OfAuto = &anthropic.ToolChoiceAutoParam{}
	case agent.ToolNone:
		p.ToolChoice.OfNone = &anthropic.ToolChoiceNoneParam{}
	case agent.ToolRequired:
		p.ToolChoice.OfAny = &anthropic.ToolChoiceAnyParam{}
	default:
		name := string(opts.ToolChoice)
		if !names[name] {
			return fmt.Errorf("anthropic: tool choice %q names no tool of the request: %w", name, thread.ErrInvalid)
		}
		p.ToolChoice.OfTool = &anthropic.ToolChoiceToolParam{Name: name}
	}
	return nil
}

// toolSchema returns a tool's input schema as Anthropic wants it: an object
// schema, with "type":"object" added when the schema leaves it out.
func toolSchema(params json.RawMessage) ([]byte, error) {
	if params == nil {
		return []byte(`{"type":"object"}`), nil
	}
	schema, err := compactObject(params)
	if err != nil {
		return nil, err
	}
	var s struct {
		Type *string `json:"type"`
	}
	if err := json.Unmarshal(schema, &s); err != nil {
		return nil, fmt.Errorf("parameters: %v: %w", err, thread.ErrInvalid)
	}
	switch {
	case s.Type == nil && string(schema) == "{}":
		return []byte(`{"type":"object"}`), nil
	case s.Type == nil:
		return append([]byte(`{"type":"object",`), schema[1:]...), nil
	case *s.Type != "object":
		return nil, fmt.Errorf("parameters of type %q, not object: %w", *s.Type, thread.ErrInvalid)
	}
	return schema, nil
}

// compactObject returns the JSON object b compacted, or an ErrInvalid.
func compactObject(b []byte) ([]byte, error) {
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return nil, fmt.Errorf("invalid JSON: %v: %w", err, thread.ErrInvalid)
	}
	if buf.Len() == 0 || buf.Bytes()[0] != '{' {
		return nil, fmt.Errorf("JSON schema is not an object: %w", thread.ErrInvalid)
	}
	return buf.Bytes(), nil
}

// convertMessages turns loom messages into Anthropic's system blocks and
// strictly alternating turns.
//
// System messages' text joins the system blocks. Tool messages become user
// turns; consecutive turns of one role are merged into one, so the results
// of an assistant turn's calls, and the user's text after them, reach
// Anthropic as the one user turn it requires. Within a user turn the
// tool_result blocks go first, as Anthropic requires too. Messages with
// nothing to send (only usage, say) are left out and so merge nothing
// apart.
func convertMessages(msgs []message.Message) ([]anthropic.TextBlockParam, []anthropic.MessageParam, error) {
	var system []anthropic.TextBlockParam
	var turns []anthropic.MessageParam
	// results counts the tool_result blocks at the front of the last turn.
	results := 0
	for i, m := range msgs {
		if m.Role == message.RoleSystem {
			for _, ct := range m.Contents {
				switch ct := ct.(type) {
				case message.Text:
					if ct.Text != "" {
						system = append(system, anthropic.TextBlockParam{Text: ct.Text})
					}
				case message.Usage, message.Error, message.Unknown:
				default:
					return nil, nil, fmt.Errorf("anthropic: message %d: system message with %s content: %w", i, contentType(ct), thread.ErrInvalid)
				}
			}
			continue
		}
		var role anthropic.MessageParamRole
		switch m.Role {
		case message.RoleUser, message.RoleTool:
			role = anthropic.MessageParamRoleUser
		case message.RoleAssistant:
			role = anthropic.MessageParamRoleAssistant
		default:
			return nil, nil, fmt.Errorf("anthropic: message %d: role %q has no Anthropic equivalent: %w", i, m.Role, thread.ErrInvalid)
		}
		var blocks, res []anthropic.ContentBlockParamUnion
		for _, ct := range m.Contents {
			b, err := convertContent(m.Role, ct)
			switch {
			case err != nil:
				return nil, nil, fmt.Errorf("anthropic: message %d: %w", i, err)
			case b == nil:
			case b.OfToolResult != nil:
				res = append(res, *b)
			default:
				blocks = append(blocks, *b)
			}
		}
		if len(blocks) == 0 && len(res) == 0 {
			continue
		}
		if n := len(turns); n == 0 || turns[n-1].Role != role {
			turns = append(turns, anthropic.MessageParam{Role: role})
			results = 0
		}
		last := &turns[len(turns)-1]
		if len(res) > 0 {
			last.Content = append(last.Content[:results], append(res, last.Content[results:]...)...)
			results += len(res)
		}
		last.Content = append(last.Content, blocks...)
	}
	return system, turns, nil
}

// convertContent returns the block for one content of a message of the
// given role, or nil if the content is not sent.
func convertContent(role message.Role, ct message.Content) (*anthropic.ContentBlockParamUnion, error) {
	block := func(b anthropic.ContentBlockParamUnion) (*anthropic.ContentBlockParamUnion, error) { return &b, nil }
	assistant := role == message.RoleAssistant
	switch ct := ct.(type) {
	case message.Text:
		// Anthropic refuses empty text blocks.
		if ct.Text == "" {
			return nil, nil
		}
		return block(anthropic.NewTextBlock(ct.Text))
	case message.Data:
		b, err := dataBlock(ct)
		if err != nil {
			return nil, err
		}
		return block(b)
	case message.FunctionCall:
		if !assistant {
			return nil, fmt.Errorf("function call in a %s message: %w", role, thread.ErrInvalid)
		}
		return block(anthropic.NewToolUseBlock(ct.CallID, callInput(ct.Arguments), ct.Name))
	case message.FunctionResult:
		if assistant {
			return nil, fmt.Errorf("function result in an assistant message: %w", thread.ErrInvalid)
		}
		tr := anthropic.ToolResultBlockParam{ToolUseID: ct.CallID}
		if ct.Result != "" {
			tr.Content = []anthropic.ToolResultBlockParamContentUnion{{OfText: &anthropic.TextBlockParam{Text: ct.Result}}}
		}
		if ct.IsError {
			tr.IsError = param.NewOpt(true)
		}
		return block(anthropic.ContentBlockParamUnion{OfToolResult: &tr})
	case message.Reasoning:
		if !assistant {
			return nil, fmt.Errorf("reasoning in a %s message: %w", role, thread.ErrInvalid)
		}
		if data, ok := strings.CutPrefix(ct.Protected, redactedPrefix); ok {
			return block(anthropic.NewRedactedThinkingBlock(data))
		}
		// Anthropic verifies the signature of every thinking block it is
		// sent; reasoning without one (another provider's, say) would
		// only make the request fail.
		if ct.Protected == "" {
			return nil, nil
		}
		return block(anthropic.NewThinkingBlock(ct.Protected, ct.Text))
	case message.Usage, message.Error, message.Unknown:
		return nil, nil
	default:
		return nil, fmt.Errorf("content %s: %w", contentType(ct), thread.ErrInvalid)
	}
}

// contentType names a content for an error message, nil included.
func contentType(ct message.Content) string {
	if ct == nil {
		return "nil"
	}
	return fmt.Sprintf("%q", ct.Type())
}

// callInput returns a call's arguments as a tool_use block's input, which
// Anthropic accepts only as a JSON object. Arguments that are not one (a
// model cut off mid-call, another provider's call) are sent as {}: the
// thread keeps what the model wrote, and the call's result, usually an
// error about the arguments, tells the model what went wrong.
func callInput(args string) json.RawMessage {
	b := bytes.TrimSpace([]byte(args))
	if len(b) > 0 && b[0] == '{' && json.Valid(b) {
		return b
	}
	return json.RawMessage(`{}`)
}

// dataBlock returns an image block for image/* data and a document block for
// PDFs. Inline bytes and data: URIs are sent as base64, http(s) URIs as URL
// sources.
func dataBlock(d message.Data) (anthropic.ContentBlockParamUnion, error) {
	var none anthropic.ContentBlockParamUnion
	mediaType := d.MediaType
	var b64, link string
	switch {
	case len(d.Data) > 0:
		b64 = base64.StdEncoding.EncodeToString(d.Data)
	case strings.HasPrefix(d.URI, "data:"):
		mt, data, err := parseDataURI(d.URI)
		if err != nil {
			return none, err
		}
		if mediaType == "" {
			mediaType = mt
		}
		b64 = base64.StdEncoding.EncodeToString(data)
	case strings.HasPrefix(d.URI, "https://"), strings.HasPrefix(d.URI, "http://"):
		link = d.URI
		if mediaType == "" {
			if u, err := url.Parse(link); err == nil {
				mediaType = mime.TypeByExtension(path.Ext(u.Path))
			}
		}
	case d.URI == "":
		return none, fmt.Errorf("data without bytes or URI: %w", thread.ErrInvalid)
	default:
		return none, fmt.Errorf("data URI %q: only http(s) and data: URIs can be sent: %w", truncate(d.URI, 64), thread.ErrInvalid)
	}
	if mt, _, err := mime.ParseMediaType(mediaType); err == nil {
		mediaType = mt
	}
	switch {
	case strings.HasPrefix(mediaType, "image/"):
		if link != "" {
			return anthropic.NewImageBlock(anthropic.URLImageSourceParam{URL: link}), nil
		}
		return anthropic.NewImageBlockBase64(mediaType, b64), nil
	case mediaType == "application/pdf":
		var b anthropic.ContentBlockParamUnion
		if link != "" {
			b = anthropic.NewDocumentBlock(anthropic.URLPDFSourceParam{URL: link})
		} else {
			b = anthropic.NewDocumentBlock(anthropic.Base64PDFSourceParam{Data: b64})
		}
		if d.Name != "" {
			b.OfDocument.Title = param.NewOpt(d.Name)
		}
		return b, nil
	case mediaType == "":
		return none, fmt.Errorf("data without a media type: %w", thread.ErrInvalid)
	default:
		return none, fmt.Errorf("data of type %q: Anthropic takes images and PDFs: %w", mediaType, thread.ErrInvalid)
	}
}

// parseDataURI returns the media type and the bytes of a data: URI.
func parseDataURI(uri string) (string, []byte, error) {
	meta, data, ok := strings.Cut(strings.TrimPrefix(uri, "data:"), ",")
	if !ok {
		return "", nil, fmt.Errorf("malformed data: URI: %w", thread.ErrInvalid)
	}
	mediaType, isBase64 := strings.CutSuffix(meta, ";base64")
	if mt, _, err := mime.ParseMediaType(mediaType); err == nil {
		mediaType = mt
	}
	if isBase64 {
		b, err := base64.StdEncoding.DecodeString(data)
		if err != nil {
			return "", nil, fmt.Errorf("data: URI: %v: %w", err, thread.ErrInvalid)
		}
		return mediaType, b, nil
	}
	s, err := url.PathUnescape(data)
	if err != nil {
		return "", nil, fmt.Errorf("data: URI: %v: %w", err, thread.ErrInvalid)
	}
	return mediaType, []byte(s), nil
}
