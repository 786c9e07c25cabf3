package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/loomthreads/loom/thread"
)

// Tool is something a model may call. The agent runs the calls of one
// response concurrently, so Call must be safe for concurrent use unless
// the tool is Sequential.
type Tool interface {
	// Spec describes the tool to the model.
	Spec() ToolSpec
	// Call runs the tool with the arguments the model wrote (JSON text)
	// and returns its result, usually JSON or plain text. An error is
	// reported to the model as a failed result, not to the run's caller.
	// Call must return soon after ctx ends.
	Call(ctx context.Context, arguments string) (string, error)
}

// ApprovalTool is a Tool whose calls may need a person's approval. A run
// that gets such a call stops with the call pending; the next run decides
// it (see Request.Approvals).
type ApprovalTool interface {
	Tool
	NeedsApproval(arguments string) bool
}

// SequentialTool is a Tool whose calls must not overlap: the agent runs
// them one at a time, in the order the model made them.
type SequentialTool interface {
	Tool
	Sequential() bool
}

var toolName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// FuncTool is a Tool made from a Go function by NewFunc.
type FuncTool struct {
	spec     ToolSpec
	call     func(ctx context.Context, arguments string) (string, error)
	schema   *jsonschema.Resolved
	approval bool
	seq      bool
}

// ToolOption configures a FuncTool.
type ToolOption func(*FuncTool)

// WithApproval makes every call of the tool wait for approval.
func WithApproval() ToolOption { return func(t *FuncTool) { t.approval = true } }

// WithSequential makes the tool's calls run one at a time.
func WithSequential() ToolOption { return func(t *FuncTool) { t.seq = true } }

// NewFunc makes a Tool from fn. The parameters' JSON Schema is derived from
// In, which should be a struct: its fields' json names are the parameters,
// fields without omitempty or omitzero are required, and a `jsonschema:"…"`
// tag describes a field. Arguments are checked against the schema before fn
// runs, so fn sees only valid input and the model gets a precise error
// otherwise. The result is Out as JSON, or as it is when Out is a string.
//
// NewFunc returns an error wrapping thread.ErrInvalid for a bad name or a
// type that JSON Schema cannot describe.
func NewFunc[In, Out any](name, description string, fn func(ctx context.Context, in In) (Out, error), opts ...ToolOption) (*FuncTool, error) {
	if !toolName.MatchString(name) {
		return nil, fmt.Errorf("tool name %q: 1 to 64 letters, digits, _ or -: %w", name, thread.ErrInvalid)
	}
	s, err := jsonschema.For[In](nil)
	if err != nil {
		return nil, fmt.Errorf("tool %s: %v: %w", name, err, thread.ErrInvalid)
	}
	raw, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("tool %s: schema: %v: %w", name, err, thread.ErrInvalid)
	}
	resolved, err := s.Resolve(nil)
	if err != nil {
		return nil, fmt.Errorf("tool %s: schema: %v: %w", name, err, thread.ErrInvalid)
	}
	t := &FuncTool{spec: ToolSpec{Name: name, Description: description, Parameters: raw}, schema: resolved}
	t.call = func(ctx context.Context, arguments string) (string, error) {
		if arguments == "" {
			arguments = "{}"
		}
		var generic any
		if err := json.Unmarshal([]byte(arguments), &generic); err != nil {
			return "", fmt.Errorf("arguments are not JSON: %v", err)
		}
		if err := t.schema.Validate(generic); err != nil {
			return "", fmt.Errorf("arguments do not match the schema: %v", err)
		}
		var in In
		if err := json.Unmarshal([]byte(arguments), &in); err != nil {
			return "", fmt.Errorf("arguments: %v", err)
		}
		out, err := fn(ctx, in)
		if err != nil {
			return "", err
		}
		if v := reflect.ValueOf(out); v.Kind() == reflect.String {
			return v.String(), nil
		}
		b, err := json.Marshal(out)
		if err != nil {
			return "", fmt.Errorf("result: %v", err)
		}
		return string(b), nil
	}
	for _, o := range opts {
		o(t)
	}
	return t, nil
}

// MustFunc is NewFunc for tools defined at package level: it panics on the
// errors NewFunc returns, which depend only on the program's own code.
func MustFunc[In, Out any](name, description string, fn func(ctx context.Context, in In) (Out, error), opts ...ToolOption) *FuncTool {
	t, err := NewFunc(name, description, fn, opts...)
	if err != nil {
		panic(err)
	}
	return t
}

// Spec returns the tool's name, description and parameter schema.
func (t *FuncTool) Spec() ToolSpec { return t.spec }

// Call checks the arguments against the schema, decodes them and calls the
// function.
func (t *FuncTool) Call(ctx context.Context, arguments string) (string, error) {
	return t.call(ctx, arguments)
}

// NeedsApproval reports whether the tool was made WithApproval.
func (t *FuncTool) NeedsApproval(string) bool { return t.approval }

// Sequential reports whether the tool was made WithSequential.
func (t *FuncTool) Sequential() bool { return t.seq }
