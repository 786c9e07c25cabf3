package langgraph

import (
	"context"

	"github.com/loomthreads/loom/thread"
)

// Saver keeps LangGraph checkpoints in the threads of a DB. It is safe for
// concurrent use.
type Saver struct {
	db *thread.DB
}

// New returns a Saver on db (a tenant's DB keeps that tenant's threads).
func New(db *thread.DB) *Saver { return &Saver{db: db} }

// Put stores a checkpoint and returns its config.
func (s *Saver) Put(ctx context.Context, req PutRequest) (PutResponse, error) {
	return PutResponse{}, thread.ErrUnsupported
}

// PutWrites stores the pending writes of a task.
func (s *Saver) PutWrites(ctx context.Context, req WritesRequest) error {
	return thread.ErrUnsupported
}

// Get returns the checkpoint cfg names, or the latest of its thread and
// namespace when cfg.CheckpointID is "". None is ErrNotFound.
func (s *Saver) Get(ctx context.Context, cfg Config) (*Tuple, error) {
	return nil, thread.ErrUnsupported
}

// List returns the checkpoints req selects, newest first.
func (s *Saver) List(ctx context.Context, req ListRequest) ([]Tuple, error) {
	return nil, thread.ErrUnsupported
}

// DeleteThread removes a LangGraph thread with every namespace. A missing
// thread is not an error.
func (s *Saver) DeleteThread(ctx context.Context, threadID string) error {
	return thread.ErrUnsupported
}

// CopyThread copies every checkpoint of every namespace of src to dst.
func (s *Saver) CopyThread(ctx context.Context, src, dst string) error {
	return thread.ErrUnsupported
}

// Prune keeps only the latest checkpoint of each namespace of the threads
// (KeepLatest), or deletes them (DeleteAll).
func (s *Saver) Prune(ctx context.Context, threadIDs []string, strategy string) error {
	return thread.ErrUnsupported
}

// DeleteForRuns deletes every checkpoint whose metadata run_id is one of
// runIDs, with its writes.
func (s *Saver) DeleteForRuns(ctx context.Context, runIDs []string) error {
	return thread.ErrUnsupported
}

// DeltaHistory is getDeltaChannelHistory.
func (s *Saver) DeltaHistory(ctx context.Context, req DeltaRequest) (DeltaResponse, error) {
	return DeltaResponse{}, thread.ErrUnsupported
}
