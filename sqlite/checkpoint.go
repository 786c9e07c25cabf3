package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strconv"
	"sync"
	"time"
)

// Checkpoints of the write-ahead log, off the writer's path (issue 27).
//
// SQLite's auto-checkpoint runs inside the COMMIT of whichever write takes
// the log past 1000 pages, and that write pays for copying the log into
// the database: an agent's turn now and then took five times as long. The
// store's write connection has it off (wal_autocheckpoint=0), and the
// store's checkpointer does it instead, on a connection of its own. Every
// walCheckEvery it looks at the size of the -wal file; past
// walPassiveBytes, it runs a PASSIVE checkpoint, which copies what no
// reader still needs without taking any lock a writer waits for, each
// time the log has grown by a quarter of that, and once more when the
// writes pause. A write starts the log over from its beginning when a
// checkpoint has copied all of it, and journal_size_limit on the write
// connection then cuts the file back to walPassiveBytes, so that the size
// of the file measures the log.
//
// A writer that never pauses keeps a PASSIVE checkpoint from ever copying
// all of the log (there are always new frames), and readers may hold it
// back too; past walRestartBytes the checkpointer runs a PASSIVE and then
// a RESTART checkpoint, which takes the write lock to copy the few frames
// written since, waits at most checkpointBusy for readers to leave the
// log, and makes the next write start it over. It holds the store's write
// connection meanwhile, so that the store's writes, which would otherwise
// win the lock from it again and again, wait for it: once every
// walRestartBytes of log, for a short copy, instead of a full one after
// every 1000 pages. A RESTART that readers outlast is tried again after a
// growing pause.
//
// Checkpoints only copy: the log stays the durable record of every
// acknowledged write, and a crash at any moment loses nothing. Several
// processes on one file each run their own checkpointer; SQLite runs one
// checkpoint at a time, and the others find it busy and try again at
// their next look.
var (
	walCheckEvery         = 10 * time.Millisecond
	walPassiveBytes int64 = 4 << 20 // about SQLite's 1000 pages
	walRestartBytes int64 = 16 << 20
	checkpointBusy        = 50 * time.Millisecond
	// walBackground false leaves checkpoints to SQLite, as before issue
	// 27: for benchmarks to compare.
	walBackground = true
)

// writePragmas adds to the query of the write connection's DSN what turns
// its checkpoints off.
func writePragmas(q url.Values) {
	if !walBackground {
		return
	}
	q.Add("_pragma", "wal_autocheckpoint(0)")
	q.Add("_pragma", fmt.Sprintf("journal_size_limit(%d)", walPassiveBytes))
}

// checkpointer is the store's background checkpointer.
type checkpointer struct {
	db   *sql.DB // one connection, its own
	stop context.CancelFunc
	done chan struct{}
	once sync.Once

	// The settings when it started.
	every            time.Duration
	passive, restart int64
}

// startCheckpointing opens the checkpointer's connection to name, a file:
// URL, and starts it.
func (s *Store) startCheckpointing(name string, syncMode Synchronous) error {
	if !walBackground {
		return nil
	}
	q := url.Values{}
	q.Set("_busy_timeout", strconv.FormatInt(checkpointBusy.Milliseconds(), 10))
	q.Set("_synchronous", string(syncMode))
	q.Add("_pragma", "wal_autocheckpoint(0)")
	db, err := sql.Open("sqlite", name+"?"+q.Encode())
	if err != nil {
		return err
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
	ctx, cancel := context.WithCancel(context.Background())
	cp := &checkpointer{db: db, stop: cancel, done: make(chan struct{}),
		every: walCheckEvery, passive: walPassiveBytes, restart: walRestartBytes}
	s.ckpt = cp
	go s.checkpointing(ctx, cp)
	return nil
}

// stopCheckpointing stops the checkpointer, waits for it and closes its
// connection.
func (s *Store) stopCheckpointing() error {
	cp := s.ckpt
	if cp == nil {
		return nil
	}
	var err error
	cp.once.Do(func() {
		cp.stop()
		<-cp.done
		err = cp.db.Close()
	})
	return err
}

// walStat is what the checkpointer sees of the -wal file.
type walStat struct {
	size int64
	mod  time.Time
}

func (s *Store) walStat() (walStat, bool) {
	fi, err := os.Stat(s.path + "-wal")
	if err != nil {
		return walStat{}, false // no log (yet, or any more)
	}
	return walStat{fi.Size(), fi.ModTime()}, true
}

func (w walStat) same(o walStat) bool { return w.size == o.size && w.mod.Equal(o.mod) }

// checkpointing looks at the log every cp.every until ctx is done, and
// checkpoints it as the comment on walCheckEvery says. A failed checkpoint
// is logged (once until one succeeds) and tried again at the next look.
func (s *Store) checkpointing(ctx context.Context, cp *checkpointer) {
	defer close(cp.done)
	t := time.NewTicker(cp.every)
	defer t.Stop()
	var (
		prev, after walStat // at the previous look, after the last checkpoint
		pause       = 100 * time.Millisecond
		nextRestart time.Time
		failing     string
	)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now, ok := s.walStat()
		if !ok {
			continue
		}
		idle := now.same(prev)
		prev = now
		if now.size < after.size {
			after = walStat{} // cut back: the log started over
		}
		if now.size <= cp.passive || now.same(after) {
			continue
		}
		restart := now.size > cp.restart && !time.Now().Before(nextRestart)
		if !restart && !idle && now.size < after.size+cp.passive/4 {
			continue
		}
		_, err := s.checkpoint(ctx, cp.db, "PASSIVE")
		busy := false
		if err == nil && restart {
			busy, err = s.restart(ctx, cp.db)
		}
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			if msg := err.Error(); msg != failing {
				failing = msg
				slog.Warn("sqlite: checkpoint of the write-ahead log failed; retrying", "path", s.path, "err", err)
			}
			continue
		}
		failing = ""
		if restart {
			if busy {
				nextRestart = time.Now().Add(pause)
				pause = min(2*pause, 5*time.Second)
			} else {
				pause = 100 * time.Millisecond
			}
		}
		after, _ = s.walStat()
		prev = after
	}
}

// restart runs a RESTART checkpoint on db while it holds the store's write
// connection, idle: the store's writes wait for it (they would win the
// write lock from it again and again), and it needs the lock only to copy
// what was written since the PASSIVE checkpoint before it.
func (s *Store) restart(ctx context.Context, db *sql.DB) (busy bool, err error) {
	w, err := s.w.Conn(ctx)
	if err != nil {
		return false, fmt.Errorf("RESTART: %w", err)
	}
	defer w.Close()
	return s.checkpoint(ctx, db, "RESTART")
}

// checkpoint runs one checkpoint of the log on db, in mode PASSIVE or
// RESTART, and says whether readers or another checkpoint kept it from
// finishing.
func (s *Store) checkpoint(ctx context.Context, db *sql.DB, mode string) (busy bool, err error) {
	var b, logged, copied int64
	if err := db.QueryRowContext(ctx, "PRAGMA wal_checkpoint("+mode+")").Scan(&b, &logged, &copied); err != nil {
		if lockedOut(err) {
			return true, nil
		}
		return false, fmt.Errorf("%s: %w", mode, err)
	}
	return b != 0 || copied < logged, nil
}
