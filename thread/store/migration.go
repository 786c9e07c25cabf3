package store

import "context"

// MigrationProgress reports how far a store has got in migrating its data
// to a newer schema as it opens.
type MigrationProgress struct {
	// Store names the kind of store migrating: its package, such as
	// "redis" or "jsonfile" (never a URL, which may hold a password).
	Store string
	// Step says what the migration does, such as "tenant keys".
	Step string
	// Done counts the threads of the step migrated so far, Total the
	// threads it migrates; the last report of a step has Done == Total.
	Done, Total int
}

// migrationKey is the context key of the function WithMigrationProgress
// sets.
type migrationKey struct{}

// WithMigrationProgress returns a context that carries f: a store opened
// with it (Open, OpenStore, or a backend's own Open) that migrates its data
// calls f as it goes, from the goroutine that opens it, one call at a time.
// f should return quickly: the migration waits for it.
//
// It is a context value, not an option, because stores are opened from
// URLs through the registry (Register), whose OpenFunc takes no options of
// the caller's: the context is the one thing that reaches every backend.
func WithMigrationProgress(ctx context.Context, f func(MigrationProgress)) context.Context {
	return context.WithValue(ctx, migrationKey{}, f)
}

// ReportMigration passes p to the function that ctx carries
// (WithMigrationProgress); without one it does nothing. Stores call it
// while they migrate, after each thread.
func ReportMigration(ctx context.Context, p MigrationProgress) {
	if f, _ := ctx.Value(migrationKey{}).(func(MigrationProgress)); f != nil {
		f(p)
	}
}
