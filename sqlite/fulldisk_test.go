package sqlite

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

// TestFullDatabase: a write SQLite has no room for (SQLITE_FULL: the disk
// is full, or the database reached its max_page_count, as here) fails
// with thread.ErrStorageFull and changes nothing; reads go on, and the
// store takes writes again once there is room.
func TestFullDatabase(t *testing.T) {
	ctx := t.Context()
	s := openStore(t)
	db := thread.New(s, nil)
	th, err := db.Create(ctx, thread.CreateOptions{ID: "a", Messages: []message.Message{message.User("x")}})
	if err != nil {
		t.Fatal(err)
	}
	var pages int64
	if err := s.w.QueryRowContext(ctx, "PRAGMA page_count").Scan(&pages); err != nil {
		t.Fatal(err)
	}
	if _, err := s.w.ExecContext(ctx, "PRAGMA max_page_count = "+strconv.FormatInt(pages, 10)); err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("a long message ", 64<<10)
	_, err = th.Append(ctx, message.User(big))
	if !errors.Is(err, thread.ErrStorageFull) {
		t.Fatalf("append to a full database: %v, want ErrStorageFull", err)
	}
	if r, err := s.Thread(ctx, "a"); err != nil || r.Version != 1 {
		t.Fatalf("read of a full database: %+v %v, want version 1", r, err)
	}
	if _, err := s.w.ExecContext(ctx, "PRAGMA max_page_count = 1073741823"); err != nil {
		t.Fatal(err)
	}
	if _, err := th.Append(ctx, message.User(big)); err != nil {
		t.Fatalf("append once there is room: %v", err)
	}
}
