package thread

import (
	"errors"
	"fmt"
)

// The errors of package thread. Every store returns them (wrapped with
// context), callers match them with errors.Is, and the server maps them to
// HTTP statuses and MCP errors in one table.
var (
	// ErrNotFound is returned when a thread, commit, message, checkpoint or
	// version does not exist (or belongs to another tenant).
	ErrNotFound = errors.New("not found")
	// ErrConflict is returned when a write was made against a version that is
	// no longer current, or would create something that already exists.
	// Nothing was changed; read the thread again and decide.
	ErrConflict = errors.New("conflict")
	// ErrInvalid is returned for bad input: a malformed id, message, state or
	// document, or a value over a limit. Nothing was changed.
	ErrInvalid = errors.New("invalid")
	// ErrUnsupported is returned when a store or a thread kind cannot do what
	// was asked.
	ErrUnsupported = errors.New("unsupported")
	// ErrTooDeep is returned when JSON that a thread would hold (a state
	// value, a message's metadata, a content's raw JSON) nests deeper than
	// Limits.JSONDepth. It wraps ErrInvalid: nothing was changed.
	ErrTooDeep = fmt.Errorf("JSON nested too deeply: %w", ErrInvalid)
	// ErrDuplicateID is returned when a commit appends a message whose id
	// the thread holds already. It wraps ErrConflict; unlike a version that
	// moved, reading the thread again does not resolve it.
	ErrDuplicateID = fmt.Errorf("the thread holds a message with this id already: %w", ErrConflict)
)
