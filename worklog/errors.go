package worklog

import (
	"errors"
	"fmt"
	"strings"

	"github.com/loomthreads/loom/thread"
)

// The errors of package worklog, matched with errors.Is. Each wraps the
// sentinel of package thread that means the same thing, so the server's one
// error table (internal/apierr) answers them without a row of their own:
// ErrInvalid and ErrAmbiguous are bad requests, ErrNotFound is a 404.
var (
	// ErrInvalid is returned for bad input: blank text, a text over
	// MaxTextLen or a note over MaxNoteLen, a malformed session id, an
	// unknown status, a value that normalizes to no item. Nothing was
	// changed.
	ErrInvalid error = &sentinel{"invalid", thread.ErrInvalid}
	// ErrNotFound is returned by Resolve when no item has the id, no item's
	// text contains the text to match, or #N is past the last open item.
	// Nothing was changed.
	ErrNotFound error = &sentinel{"not found", thread.ErrNotFound}
	// ErrAmbiguous is returned (as an *AmbiguousError, which lists the
	// candidates) by Resolve when the text to match is in the text of
	// several open items, or of several resolved items and no open one.
	// Nothing was changed.
	ErrAmbiguous error = &sentinel{"ambiguous", thread.ErrInvalid}
	// ErrLockTimeout is returned (wrapped) by the writes of a Log or a
	// FileSessions when the file's lock stayed taken for longer than
	// Options.LockTimeout: another process, or a stopped one, holds it.
	ErrLockTimeout = errors.New("worklog: timed out waiting for the file's lock")
)

// sentinel is an error with its own identity that also matches the
// sentinel of package thread it refines.
type sentinel struct {
	msg  string
	base error
}

func (e *sentinel) Error() string { return e.msg }
func (e *sentinel) Unwrap() error { return e.base }

// AmbiguousError is the error of a text match that names more than one
// item. It matches ErrAmbiguous. Its message lists the candidates' ids
// and texts (shortened; the first 10, then how many more); Candidates
// holds them all, whole.
type AmbiguousError struct {
	// Query is the text that was matched, as given.
	Query string
	// Candidates are the matching items, in the order of the file.
	Candidates []Item
}

// Error says how many items matched and lists them.
func (e *AmbiguousError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "worklog: %q matches %d items, give the id of one: ", shorten(e.Query, 80), len(e.Candidates))
	for i, c := range e.Candidates {
		if i == maxListed {
			fmt.Fprintf(&b, "; and %d more", len(e.Candidates)-maxListed)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s %q", c.ID, shorten(c.Text, 80))
	}
	b.WriteString(": ambiguous")
	return b.String()
}

// maxListed is how many candidates an AmbiguousError's message lists.
const maxListed = 10

// Unwrap makes the error match ErrAmbiguous.
func (e *AmbiguousError) Unwrap() error { return ErrAmbiguous }

// shorten cuts s to at most n runes, marking the cut with "…".
func shorten(s string, n int) string {
	i := 0
	for j := range s {
		if i == n {
			return s[:j] + "…"
		}
		i++
	}
	return s
}
