package worklog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/loomthreads/loom/thread"
)

// clock is a settable clock for Options.Now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// newLog opens a Log in a new directory, without fsyncs, on clk.
func newLog(tb testing.TB, clk *clock) *Log {
	tb.Helper()
	return openLog(tb, filepath.Join(tb.TempDir(), ".gitmem"), clk, nil)
}

// onThreads is set when the tests run against Logs that keep their items
// in loom threads (OpenDB) rather than in files: TestLogOnThreads runs the
// package's tests again so, with LOOM_WORKLOG_ITEMS=thread. The Logs of one
// directory then share one in-memory thread.DB; tests of the file itself
// skip (fileOnly).
var onThreads = os.Getenv("LOOM_WORKLOG_ITEMS") == "thread"

var dbs sync.Map // directory → *thread.DB

// fileOnly skips a test of the local file when the items are in threads.
func fileOnly(tb testing.TB) {
	if onThreads {
		tb.Skip("a test of the local file")
	}
}

func openLog(tb testing.TB, dir string, clk *clock, sessions SessionStore) *Log {
	tb.Helper()
	if onThreads {
		db, _ := dbs.LoadOrStore(dir, thread.New(thread.NewMemoryStore(), nil))
		if sessions == nil {
			sessions = NewFileSessions(dir, &Options{NoSync: true})
		}
		l, err := OpenDB(db.(*thread.DB), &Options{Now: clk.Now, Sessions: sessions})
		if err != nil {
			tb.Fatal(err)
		}
		l.dir = dir // for newLogAt(l.Dir())
		return l
	}
	l, err := Open(dir, &Options{NoSync: true, Now: clk.Now, Sessions: sessions, LockTimeout: 5 * time.Second})
	if err != nil {
		tb.Fatal(err)
	}
	return l
}

func mustCreate(tb testing.TB, l *Log, text string) Item {
	tb.Helper()
	res, err := l.Create(tb.Context(), CreateOptions{Text: text})
	if err != nil {
		tb.Fatalf("Create(%q): %v", text, err)
	}
	return res.Thread
}

func listAll(tb testing.TB, l *Log) []Item {
	tb.Helper()
	res, err := l.List(tb.Context(), ListOptions{IncludeResolved: true})
	if err != nil {
		tb.Fatal(err)
	}
	return res.Threads
}

func readFile(tb testing.TB, path string) []byte {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// item parses an item object, for expectations.
func item(tb testing.TB, js string) Item {
	tb.Helper()
	var it Item
	if err := json.Unmarshal([]byte(js), &it); err != nil {
		tb.Fatalf("item %s: %v", js, err)
	}
	return it
}

// diffItems compares items, times as instants.
func diffItems(want, got any) string {
	return cmp.Diff(want, got, cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) }))
}

// contentOf returns what a Log keeps its items in, to check that
// something did not change it: the file's bytes, or the thread's head.
func contentOf(tb testing.TB, l *Log) string {
	tb.Helper()
	if f, ok := l.items.(*fileItems); ok {
		return string(readFile(tb, f.f.path))
	}
	t := l.items.(*threadItems)
	th, err := t.db.Thread(tb.Context(), t.id)
	if err != nil {
		tb.Fatal(err)
	}
	return fmt.Sprint(th.Record().Head, th.Version())
}

// writeFile writes threads.json in dir; with the items in threads, it
// puts the items the file holds into the directory's thread instead.
func writeFile(tb testing.TB, dir, content string) {
	tb.Helper()
	if onThreads {
		s, err := parseThreads([]byte(content), time.Now())
		if err != nil {
			tb.Fatal(err)
		}
		l := openLog(tb, dir, newClock(), nil)
		if _, err := l.items.update(tb.Context(), func(*snapshot) ([]*entry, bool, error) { return s.entries, true, nil }); err != nil {
			tb.Fatal(err)
		}
		return
	}
	if err := os.WriteFile(filepath.Join(dir, ThreadsFile), []byte(content), 0o644); err != nil {
		tb.Fatal(err)
	}
}

// localFile returns the store of a Log's items in the local file, nil if
// they are in a thread.
func (l *Log) localFile() *fileItems {
	f, _ := l.items.(*fileItems)
	return f
}

// encodeThreads returns what writeThreads writes.
func encodeThreads(entries []*entry, nl bool) []byte {
	var b bytes.Buffer
	writeThreads(&b, entries, nl)
	return b.Bytes()
}
