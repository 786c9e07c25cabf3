package thread

import "github.com/loomthreads/loom/thread/store"

// The values a thread is made of, and the errors every call returns, are
// package store's: the contract a backend implements shares them with the
// API, as database/sql/driver's values reach database/sql's callers.
type (
	Kind              = store.Kind
	Op                = store.Op
	Commit            = store.Commit
	ForkPoint         = store.ForkPoint
	Record            = store.Record
	HistoryEntry      = store.HistoryEntry
	Checkpoint        = store.Checkpoint
	ListOptions       = store.ListOptions
	Order             = store.Order
	Internal          = store.Internal
	HistoryOptions    = store.HistoryOptions
	Change            = store.Change
	ChangeKind        = store.ChangeKind
	MigrationProgress = store.MigrationProgress
	StoreError        = store.StoreError
)

// The thread kinds (see store.Kind).
const (
	KindUndetermined = store.KindUndetermined
	KindLocal        = store.KindLocal
	KindService      = store.KindService
	KindWorkflow     = store.KindWorkflow
)

// The operations recorded in commits and history entries (see store.Op).
const (
	OpCreate   = store.OpCreate
	OpAppend   = store.OpAppend
	OpState    = store.OpState
	OpCompact  = store.OpCompact
	OpFork     = store.OpFork
	OpCopy     = store.OpCopy
	OpLoad     = store.OpLoad
	OpReset    = store.OpReset
	OpRollback = store.OpRollback
	OpRestore  = store.OpRestore
	OpUpdate   = store.OpUpdate
)

// The orders of a listing (ListOptions.Order).
const (
	OrderID      = store.OrderID
	OrderUpdated = store.OrderUpdated
)

// Which threads a listing takes by whether loom made them for its own use
// (ListOptions.Internal, see Own).
const (
	InternalInclude = store.InternalInclude
	InternalExclude = store.InternalExclude
	InternalOnly    = store.InternalOnly
)

// The kinds of change a feed reports (see store.ChangeKind).
const (
	ChangeCreate     = store.ChangeCreate
	ChangeMove       = store.ChangeMove
	ChangeCheckpoint = store.ChangeCheckpoint
	ChangeDelete     = store.ChangeDelete
	ChangeGap        = store.ChangeGap
)

// Search limits: a query holds at most MaxSearchWords words, and a word
// is at most MaxSearchWordBytes long (longer runs of letters are cut).
const (
	MaxSearchWords     = store.MaxSearchWords
	MaxSearchWordBytes = store.MaxSearchWordBytes
)

// The errors of package thread; see package store for each one's meaning.
var (
	ErrNotFound    = store.ErrNotFound
	ErrConflict    = store.ErrConflict
	ErrInvalid     = store.ErrInvalid
	ErrUnsupported = store.ErrUnsupported
	ErrUnavailable = store.ErrUnavailable
	ErrStorageFull = store.ErrStorageFull
)

// WithMigrationProgress returns a context that carries f: a store opened
// with it that migrates its data calls f as it goes (see
// store.WithMigrationProgress).
var WithMigrationProgress = store.WithMigrationProgress
