package store

import "errors"

// The errors of the store contract. Every store returns them (wrapped with
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
	// ErrUnavailable is returned when the store cannot be reached or did
	// not answer in time (its server is down, restarting, partitioned or
	// overloaded past the store's deadline). A read changed nothing; a
	// write may or may not have been applied (its answer was lost), and
	// is safe to read back and decide. Try again later.
	ErrUnavailable = errors.New("store unavailable")
	// ErrStorageFull is returned when the store's disk (or its server's)
	// is full: the write was not applied. Reads keep working.
	ErrStorageFull = errors.New("store out of space")
)

// StoreError is the error of a store that could not do what was asked for
// want of its server or its disk: it wraps Kind (ErrUnavailable or
// ErrStorageFull), so errors.Is matches it, and the driver's error, Err,
// for logs. Reason says what happened in words safe to show a client,
// naming the store but none of its addresses or its driver's text ("cannot
// reach PostgreSQL", "Redis did not answer in time").
type StoreError struct {
	Kind   error
	Reason string
	Err    error
}

func (e *StoreError) Error() string {
	if e.Err == nil {
		return e.Reason
	}
	return e.Reason + ": " + e.Err.Error()
}

// Unwrap returns Kind and Err.
func (e *StoreError) Unwrap() []error { return []error{e.Kind, e.Err} }

// Unavailable returns a *StoreError of kind ErrUnavailable: reason is
// safe to show (see StoreError), err is the driver's error.
func Unavailable(reason string, err error) error {
	return &StoreError{Kind: ErrUnavailable, Reason: reason, Err: err}
}

// StorageFull returns a *StoreError of kind ErrStorageFull: reason is safe
// to show (see StoreError), err is the driver's error.
func StorageFull(reason string, err error) error {
	return &StoreError{Kind: ErrStorageFull, Reason: reason, Err: err}
}
