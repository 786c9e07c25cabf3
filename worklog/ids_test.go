package worklog

import (
	"fmt"
	"testing"

	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/storetest"
)

// TestItemWritesReadNoLine checks that a Log on threads writes its records
// with ids it makes (thread.CommitOptions.FreshIDs), which the thread does
// not look up on its line: with a DB that remembers no line, writes that
// find the Log's cache current read nothing back.
func TestItemWritesReadNoLine(t *testing.T) {
	ctx := t.Context()
	st := storetest.NewCountingStore()
	db := thread.New(st, &thread.Options{MessageIDCache: -1})
	l := dbLog(t, db, newClock())
	for i := range 3 {
		if _, err := l.Create(ctx, CreateOptions{Text: fmt.Sprint("warm ", i)}); err != nil {
			t.Fatal(err)
		}
	}
	st.Walks.Store(0)
	for i := range 10 {
		if _, err := l.Create(ctx, CreateOptions{Text: fmt.Sprint("item ", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if n := st.Walks.Load(); n != 0 {
		t.Errorf("10 item writes walked lines %d times", n)
	}
}
