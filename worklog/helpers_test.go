package worklog

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
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

func openLog(tb testing.TB, dir string, clk *clock, sessions SessionStore) *Log {
	tb.Helper()
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

// writeFile writes threads.json in dir.
func writeFile(tb testing.TB, dir, content string) {
	tb.Helper()
	if err := os.WriteFile(filepath.Join(dir, ThreadsFile), []byte(content), 0o644); err != nil {
		tb.Fatal(err)
	}
}
