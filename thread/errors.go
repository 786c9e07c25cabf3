package thread

import "fmt"

// Errors of package thread besides the store's (see package store, which
// this package's ErrNotFound, ErrConflict, … are).
var (
	// ErrTooDeep is returned when JSON that a thread would hold (a state
	// value, a message's metadata, a content's raw JSON) nests deeper than
	// Limits.JSONDepth. It wraps ErrInvalid: nothing was changed.
	ErrTooDeep = fmt.Errorf("JSON nested too deeply: %w", ErrInvalid)
	// ErrDuplicateID is returned when a commit appends a message whose id
	// the thread holds already. It wraps ErrConflict; unlike a version that
	// moved, reading the thread again does not resolve it.
	ErrDuplicateID = fmt.Errorf("the thread holds a message with this id already: %w", ErrConflict)
)
