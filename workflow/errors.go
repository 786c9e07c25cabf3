package workflow

import (
	"errors"
	"fmt"

	"github.com/loomthreads/loom/thread"
)

// The errors of package workflow wrap package thread's, so that one table
// (errors.Is against thread.ErrNotFound, ErrConflict, ErrInvalid) maps them
// to HTTP statuses and MCP errors.
var (
	// ErrBusy is returned by Run, Restore, Update, Provide, Delete,
	// CreateSubThread and DeleteSubThread when another runner holds the
	// workflow's lease: it is running elsewhere. (Checkpoint is not
	// refused: it records the workflow between steps.)
	ErrBusy = fmt.Errorf("workflow is being run by another runner: %w", thread.ErrConflict)
	// ErrNotWaiting is returned by Provide when the step named is not
	// waiting for input.
	ErrNotWaiting = fmt.Errorf("step is not waiting for input: %w", thread.ErrConflict)
	// ErrWaiting is returned by Step.Ask when the step's input has not been
	// given yet. A step returns it as it is: the runner then records the
	// step as waiting, and the workflow waits, durably, for Provide.
	ErrWaiting = errors.New("waiting for input")
	// ErrStepLimit is returned by Run, as a *StepLimitError, when the run
	// reached its RunOptions.MaxRounds with steps still to run: a loop
	// that did not end. The workflow is left resumable.
	ErrStepLimit = fmt.Errorf("step limit reached: %w", thread.ErrConflict)
	// ErrNotWorkflow is returned by Open for a thread that is not a
	// workflow.
	ErrNotWorkflow = fmt.Errorf("not a workflow: %w", thread.ErrNotFound)
)
