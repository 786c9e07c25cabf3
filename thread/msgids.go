package thread

import (
	"context"
	"fmt"

	"github.com/loomthreads/loom/message"
)

// ownIDs reports whether any of msgs comes with an id of its own.
func ownIDs(msgs []message.Message) bool {
	for _, m := range msgs {
		if m.ID != "" {
			return true
		}
	}
	return false
}

// checkNewIDs returns ErrDuplicateID when the line of head (nil: the empty
// root) holds a message with an id one of msgs, committed with op, brings
// along: a message is appended to a thread once, so that its id names one
// place in it (to fork at, to read before). A compact commit is the one
// exception: it restates the messages its summary keeps, ids and all, and
// views stop at it. The ids a thread gives are new by construction and
// need no look; a message that comes with its own id is looked for as
// forking at a message is, walking the thread's commits from its head,
// which costs the thread's length.
func (db *DB) checkNewIDs(ctx context.Context, head *Commit, msgs []message.Message, op Op) error {
	if head == nil || op == OpCompact || !ownIDs(msgs) {
		return nil
	}
	want := make(map[string]bool, len(msgs))
	for _, m := range msgs {
		if m.ID != "" {
			want[m.ID] = true
		}
	}
	for c, err := range db.store.Ancestors(ctx, head.ID, 0) {
		if err != nil {
			return err
		}
		for _, m := range c.Messages {
			if want[m.ID] {
				return fmt.Errorf("message id %q: %w", clip(m.ID), ErrDuplicateID)
			}
		}
	}
	return nil
}
