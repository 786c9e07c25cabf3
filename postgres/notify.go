package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// notifyTimeout bounds the sending of a batch's notifications.
const notifyTimeout = 5 * time.Second

// notify sends notes, the notifications of a batch that committed, on conn
// (before it goes back to the pool), in a transaction of their own with
// synchronous_commit off: one round trip.
//
// Not in the batch's transaction: PostgreSQL commits the transactions that
// notify one at a time (a lock taken before the commit, so that the
// notifications queue in commit order, is held until the commit record
// is flushed), and the batch's commit must wait for its flush; this
// transaction's commit waits for none, so it holds that lock a moment.
// (A function declared with SET synchronous_commit = off would not do: its
// setting ends when it returns, before the commit.)
//
// Its failure is not Apply's: the batch committed. The listeners miss the
// notifications (see Watch).
func notify(ctx context.Context, conn *pgx.Conn, notes []string) {
	if len(notes) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), notifyTimeout)
	defer cancel()
	var q pgx.Batch
	q.Queue("BEGIN")
	q.Queue("SET LOCAL synchronous_commit = off")
	q.Queue("SELECT loom_notify($1::text[])", notes)
	q.Queue("COMMIT")
	if err := conn.SendBatch(ctx, &q).Close(); err != nil {
		rollback(ctx, conn)
	}
}
