package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"runtime/debug"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loomthreads/loom/internal/apierr"
	"github.com/loomthreads/loom/internal/jsonerr"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/workflow"
)

// AddTool adds to s a tool whose input is In and whose output is Out, both
// structs: their JSON schemas are inferred from the types (field
// descriptions from `jsonschema:"…"` tags) and replace any in t, fields
// without omitzero or omitempty are required, and the arguments are checked
// against the input schema and decoded into In before h runs, and h's
// output is the result's structured content, repeated as JSON text. When Out
// has a method Summary() string, that text comes first in the result's
// content, for models to read.
//
// An error from h becomes a tool error (a result with IsError set) whose
// text is a code and a short message, such as `not_found: thread "th_x"`:
// not_found, invalid, conflict and unsupported for thread's sentinel errors,
// canceled when the request's context ended, and internal for anything else,
// whose text is logged to logger (nil means slog.Default()) and never sent.
// Arguments that do not match the schema are invalid. A panic in h is
// recovered and reported as internal.
//
// Other packages use AddTool to put their tools on loom's server with the
// same conventions (see Options.AddTools). Like mcp.AddTool, it panics if
// In or Out has no JSON schema, such as a struct with a func field.
func AddTool[In, Out any](s *mcp.Server, t *mcp.Tool, logger *slog.Logger, h func(ctx context.Context, in In) (Out, error)) {
	if logger == nil {
		logger = slog.Default()
	}
	tt := *t
	inSchema, err := jsonschema.For[In](schemaOptions)
	if err != nil {
		panic(fmt.Sprintf("mcpserver.AddTool %q: input schema: %v", t.Name, err))
	}
	resolved, err := inSchema.Resolve(nil)
	if err != nil {
		panic(fmt.Sprintf("mcpserver.AddTool %q: input schema: %v", t.Name, err))
	}
	outSchema, err := jsonschema.For[Out](schemaOptions)
	if err != nil {
		panic(fmt.Sprintf("mcpserver.AddTool %q: output schema: %v", t.Name, err))
	}
	tt.InputSchema, tt.OutputSchema = inSchema, outSchema
	name := tt.Name
	s.AddTool(&tt, func(ctx context.Context, req *mcp.CallToolRequest) (res *mcp.CallToolResult, _ error) {
		nameToolSpan(ctx, name)
		defer func() {
			if p := recover(); p != nil {
				logger.ErrorContext(ctx, "mcp tool panicked", "tool", name, "panic", p, "stack", string(debug.Stack()))
				res = toolError(internalText)
			}
		}()
		in, err := decode[In](req.Params.Arguments, resolved)
		if err != nil {
			return errorResult(ctx, logger, name, err), nil
		}
		out, err := h(ctx, in)
		if err != nil {
			return errorResult(ctx, logger, name, err), nil
		}
		return result(ctx, logger, name, out), nil
	})
}

// decode checks args against the input schema and decodes them into an In.
// Every failure wraps thread.ErrInvalid.
func decode[In any](args json.RawMessage, schema *jsonschema.Resolved) (In, error) {
	var in In
	if len(bytes.TrimSpace(args)) == 0 || string(bytes.TrimSpace(args)) == "null" {
		args = json.RawMessage("{}")
	}
	var generic map[string]any
	if err := json.Unmarshal(args, &generic); err != nil {
		return in, fmt.Errorf("arguments: not a JSON object: %w", thread.ErrInvalid)
	}
	if err := schema.Validate(generic); err != nil {
		return in, fmt.Errorf("arguments: %s: %w", schemaError(err), thread.ErrInvalid)
	}
	if err := json.Unmarshal(args, &in); err != nil {
		return in, fmt.Errorf("arguments: %s: %w", jsonError(err), thread.ErrInvalid)
	}
	return in, nil
}

// schemaError shortens a schema validation error for a client: the
// jsonschema package nests "validating /properties/a/items: " once per
// level, and only the innermost says where the fault is, which it names as
// a path like "a[].b".
func schemaError(err error) string {
	msg, where := err.Error(), ""
	for {
		rest, ok := strings.CutPrefix(msg, "validating ")
		if !ok {
			break
		}
		ptr, after, ok := strings.Cut(rest, ": ")
		if !ok {
			break
		}
		where, msg = ptr, after
	}
	if where == "" || where == "root" {
		return msg
	}
	path := strings.NewReplacer("/properties/", ".", "/items", "[]").Replace(where)
	return strings.TrimPrefix(path, ".") + ": " + msg
}

// jsonError shortens a decoding error for a client.
func jsonError(err error) string { return jsonerr.Describe(nil, err) }

// summarizer is the optional method of a tool's output that gives models a
// short text to read.
type summarizer interface {
	Summary() string
}

// result makes the successful result of a tool call.
func result(ctx context.Context, logger *slog.Logger, tool string, out any) *mcp.CallToolResult {
	b, err := json.Marshal(out)
	if err != nil {
		return errorResult(ctx, logger, tool, fmt.Errorf("encode result: %w", err))
	}
	res := &mcp.CallToolResult{StructuredContent: json.RawMessage(b)}
	if s, ok := out.(summarizer); ok {
		res.Content = append(res.Content, &mcp.TextContent{Text: s.Summary()})
	}
	res.Content = append(res.Content, &mcp.TextContent{Text: string(b)})
	return res
}

// sentinels are the errors whose text a message repeats at its end (": not
// found"); the code says it already.
var sentinels = []error{thread.ErrNotFound, thread.ErrInvalid, thread.ErrConflict, thread.ErrUnsupported}

// errorResult makes the tool error for err: the code and message of the
// error table the HTTP API uses too (internal/apierr), so both faces say
// the same thing; internal errors are logged, not sent.
func errorResult(ctx context.Context, logger *slog.Logger, tool string, err error) *mcp.CallToolResult {
	_, code, msg := apierr.Classify(err, false)
	if code == apierr.Internal {
		logger.ErrorContext(ctx, "mcp tool failed", "tool", tool, "err", err)
		return toolError(internalText)
	}
	for _, s := range sentinels {
		if errors.Is(err, s) {
			msg = strings.TrimPrefix(strings.TrimSuffix(msg, ": "+s.Error()), s.Error()+": ")
		}
	}
	return toolError(code + ": " + msg)
}

// internalText is all a client learns of an internal error.
const internalText = "internal: the server failed; the error is in its log"

func toolError(text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}

// schemaOptions give the types whose JSON is not what their Go fields say
// the schemas of their wire format.
var schemaOptions = &jsonschema.ForOptions{TypeSchemas: map[reflect.Type]*jsonschema.Schema{
	reflect.TypeFor[inMessage]():       inMessageSchema(),
	reflect.TypeFor[message.Message](): messageSchema(),
	reflect.TypeFor[strategyType](): {
		Type: "string",
		Enum: []any{"drop_oldest", "sliding_window", "elide_tool_results"},
	},
	reflect.TypeFor[thread.Kind](): {
		Type: "string",
		Enum: []any{string(thread.KindUndetermined), string(thread.KindLocal), string(thread.KindService), string(thread.KindWorkflow)},
	},
	reflect.TypeFor[thread.Op](): {Type: "string"},
	// Any JSON value: a workflow's inputs, outputs and prompts.
	reflect.TypeFor[json.RawMessage](): {},
	reflect.TypeFor[workflow.Status](): {
		Type: "string",
		Enum: []any{string(workflow.StatusPending), string(workflow.StatusRunning), string(workflow.StatusWaiting),
			string(workflow.StatusDone), string(workflow.StatusFailed), string(workflow.StatusInterrupted)},
	},
}}
