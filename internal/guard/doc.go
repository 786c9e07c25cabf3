// Package guard holds tests of the codebase's own rules, the ones go vet
// does not know: they read loom's source with go/ast and fail when a rule
// is broken. It has no code of its own.
package guard
