package worklog

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// The fixture is testdata/threads.json, written by the seed's own code
// (testdata/mkfixture.js: JSON.stringify(threads, null, 2), no newline at
// the end), with an item resolved the seed's way, escapes, non-ASCII text
// and fields loom does not know.

// copyFixture copies testdata/name to a new directory as threads.json.
func copyFixture(t *testing.T, name string) string {
	t.Helper()
	dir := t.TempDir()
	writeFile(t, dir, string(readFile(t, filepath.Join("testdata", name))))
	return dir
}

func TestFixtureLoads(t *testing.T) {
	fileOnly(t)
	l := openLog(t, copyFixture(t, "threads.json"), newClock(), nil)
	got := listAll(t, l)
	want := []Item{
		{ID: "t-77aa88bb", Text: "Upgrade the SDK to v2", Status: StatusResolved, CreatedAt: time.Date(2026, 2, 8, 12, 0, 0, 0, time.UTC),
			SourceSession: "c2d841be-fff2-4ac9-ae1e-4d604e2e4d69", ResolvedAt: time.Date(2026, 2, 9, 17, 45, 30, 5e8, time.UTC),
			ResolvedBySession: "c2d841be-fff2-4ac9-ae1e-4d604e2e4d69", ResolutionNote: "Done in PR #42"},
		{ID: "t-05a7ecb6", Text: "Phase 2 GitMem public npm release still pending", Status: StatusOpen,
			CreatedAt: time.Date(2026, 2, 9, 18, 12, 1, 97e6, time.UTC), SourceSession: "c2d841be-fff2-4ac9-ae1e-4d604e2e4d69"},
		{ID: "t-1b2c3d4e", Text: "Flaky integration test in CI", Status: StatusOpen, CreatedAt: time.Date(2026, 2, 10, 9, 0, 0, 0, time.UTC),
			SourceSession: "c2d841be-fff2-4ac9-ae1e-4d604e2e4d69"},
		{ID: "t-9f8e7d6c", Text: "Decide on the cache eviction policy", Status: StatusOpen, CreatedAt: time.Date(2026, 2, 11, 10, 30, 15, 25e7, time.UTC)},
		{ID: "t-a1b2c3d4", Text: "Quotes \"inside\", a tab\tand a newline\n, <b>html</b> & ampersand, “curly”, emoji 🚀, line separator \u2028 end",
			Status: StatusOpen, CreatedAt: time.Date(2026, 2, 12, 8, 0, 0, 1e6, time.UTC), SourceSession: "5d6e7f80-1111-4222-8333-944455556666"},
	}
	if d := diffItems(want, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}

func TestFixtureRoundTrip(t *testing.T) {
	fileOnly(t)
	data := readFile(t, filepath.Join("testdata", "threads.json"))
	s, err := parseThreads(data, t0)
	if err != nil {
		t.Fatal(err)
	}
	if s.dirty {
		t.Fatal("the seed's file needs rewriting")
	}
	if got := encodeThreads(s.entries, s.nl); string(got) != string(data) {
		t.Errorf("written back:\n%s\nwant the file as it was:\n%s", got, data)
	}
	// Through a Log: reading it writes nothing; a change to one item
	// leaves every other byte as it was.
	dir := copyFixture(t, "threads.json")
	l := openLog(t, dir, newClock(), nil)
	listAll(t, l)
	if got := readFile(t, l.localFile().f.path); string(got) != string(data) {
		t.Errorf("reading the file changed it")
	}
}

func TestFixtureResolve(t *testing.T) {
	fileOnly(t)
	dir := copyFixture(t, "threads.json")
	clk := newClock() // 2026-03-01T12:00:00Z, as mkfixture.js
	l := openLog(t, dir, clk, nil)
	for _, id := range []string{"t-1b2c3d4e", "t-a1b2c3d4"} {
		if _, err := l.Resolve(t.Context(), ResolveOptions{ID: id, Session: "0b1c2d3e-4f50-4617-8293-a4b5c6d7e8f9", Note: "fixed in " + id}); err != nil {
			t.Fatal(err)
		}
	}
	want := readFile(t, filepath.Join("testdata", "threads.resolved.json"))
	if got := readFile(t, l.localFile().f.path); string(got) != string(want) {
		t.Errorf("after resolving:\n%s\nwant what the seed writes:\n%s", got, want)
	}
	// A new item goes at the end, in the seed's form, and the rest stays.
	it := mustCreate(t, l, "A new item")
	got := string(readFile(t, l.localFile().f.path))
	tail := "  {\n    \"id\": \"" + it.ID + "\",\n    \"text\": \"A new item\",\n    \"status\": \"open\",\n    \"created_at\": \"2026-03-01T12:00:00.000Z\"\n  }\n]"
	if !strings.HasPrefix(got, string(want[:len(want)-2])+",\n") || !strings.HasSuffix(got, tail) {
		t.Errorf("after create:\n%s", got)
	}
}

func TestFileKeepsLayoutDetails(t *testing.T) {
	fileOnly(t)
	for name, content := range map[string]string{
		"trailing newline": "[\n  {\n    \"id\": \"t-00000001\",\n    \"text\": \"x\",\n    \"status\": \"open\",\n    \"created_at\": \"2026-02-01T00:00:00.000Z\"\n  }\n]\n",
		"empty array":      "[]",
		"other time forms": "[\n  {\n    \"id\": \"t-00000001\",\n    \"text\": \"x\",\n    \"status\": \"open\",\n    \"created_at\": \"2026-02-01T01:00:00+01:00\"\n  }\n]",
	} {
		t.Run(name, func(t *testing.T) {
			s, err := parseThreads([]byte(content), t0)
			if err != nil {
				t.Fatal(err)
			}
			if got := encodeThreads(s.entries, s.nl); string(got) != content || s.dirty {
				t.Errorf("written back as\n%s", got)
			}
		})
	}
}

func TestFileReindentsOtherLayouts(t *testing.T) {
	fileOnly(t)
	dir := t.TempDir()
	writeFile(t, dir, `[{"id":"t-00000001","text":"Compact","status":"open","created_at":"2026-02-01T00:00:00.000Z","extra":{"a":[1,2]}}]`)
	l := openLog(t, dir, newClock(), nil)
	mustCreate(t, l, "Second")
	got := string(readFile(t, l.localFile().f.path))
	want := "[\n  {\n    \"id\": \"t-00000001\",\n    \"text\": \"Compact\",\n    \"status\": \"open\",\n    \"created_at\": \"2026-02-01T00:00:00.000Z\",\n" +
		"    \"extra\": {\n      \"a\": [\n        1,\n        2\n      ]\n    }\n  },\n"
	if !strings.HasPrefix(got, want) {
		t.Errorf("file:\n%s\nwant it to start with\n%s", got, want)
	}
}

func TestLegacyFileWrittenOnce(t *testing.T) {
	fileOnly(t)
	dir := t.TempDir()
	writeFile(t, dir, `["Plain string item", "{\"item\":\"Legacy\",\"context\":\"c\"}", {"id":"t-00000001","note":"Noted","status":"open"}, null, 7]`)
	a := openLog(t, dir, newClock(), nil)
	first := listAll(t, a)
	if len(first) != 3 {
		t.Fatalf("items %+v", first)
	}
	// Another process (another Log) sees the same ids: the file was
	// written in the item format when first read.
	b := openLog(t, dir, newClock(), nil)
	if d := diffItems(first, listAll(t, b)); d != "" {
		t.Errorf("ids changed between readers (-first +second):\n%s", d)
	}
	if got := string(readFile(t, a.localFile().f.path)); strings.Contains(got, `"Plain string item",`+"\n  \"") || !strings.Contains(got, `"text": "Noted"`) || strings.Contains(got, "null") {
		t.Errorf("file after the first read:\n%s", got)
	}
}

func TestCorruptFile(t *testing.T) {
	fileOnly(t)
	for _, content := range []string{`{"not":"an array"}`, `[{"id":"t-1","text":"x"}`, `[] []`, `garbage`} {
		dir := t.TempDir()
		writeFile(t, dir, content)
		l := openLog(t, dir, newClock(), nil)
		if _, err := l.List(t.Context(), ListOptions{}); err == nil {
			t.Errorf("%s: listed", content)
		}
		if _, err := l.Create(t.Context(), CreateOptions{Text: "x"}); err == nil {
			t.Errorf("%s: created", content)
		}
		if got := string(readFile(t, filepath.Join(dir, ThreadsFile))); got != content {
			t.Errorf("%s: the file became %s", content, got)
		}
	}
}

func TestMissingFileAndDirectory(t *testing.T) {
	fileOnly(t)
	dir := filepath.Join(t.TempDir(), "project", ".gitmem")
	l := openLog(t, dir, newClock(), nil)
	if got := listAll(t, l); len(got) != 0 {
		t.Errorf("items %+v", got)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a read created the directory: %v", err)
	}
	mustCreate(t, l, "First")
	if got := string(readFile(t, filepath.Join(dir, ThreadsFile))); !strings.HasPrefix(got, "[\n  {\n    \"id\": \"t-") || !strings.HasSuffix(got, "}\n]") {
		t.Errorf("new file:\n%s", got)
	}
}

func TestWriteFailureChangesNothing(t *testing.T) {
	fileOnly(t)
	clk := newClock()
	l := newLog(t, clk)
	mustCreate(t, l, "Before")
	before := readFile(t, l.localFile().f.path)
	for _, step := range []string{"sync", "rename", "dir sync"} {
		t.Run(step, func(t *testing.T) {
			l.localFile().f.hooks.sync = func(name string) error {
				isDir := filepath.Clean(name) == filepath.Dir(l.localFile().f.path)
				if step == "sync" && !isDir || step == "dir sync" && isDir {
					return errors.New("disk on fire")
				}
				return nil
			}
			l.localFile().f.hooks.rename = func(from, to string) error {
				if step == "rename" {
					return errors.New("disk on fire")
				}
				return os.Rename(from, to)
			}
			t.Cleanup(func() { l.localFile().f.hooks.sync, l.localFile().f.hooks.rename = nil, nil })
			_, err := l.Create(t.Context(), CreateOptions{Text: "During " + step})
			if err == nil {
				t.Fatal("the write did not fail")
			}
			if step != "dir sync" {
				if got := readFile(t, l.localFile().f.path); string(got) != string(before) {
					t.Errorf("the file changed")
				}
			}
			tmps, _ := filepath.Glob(filepath.Join(filepath.Dir(l.localFile().f.path), ".threads.json.tmp-*"))
			if len(tmps) != 0 {
				t.Errorf("temporary files left: %v", tmps)
			}
		})
	}
	// The Log goes on working and read what is on disk.
	mustCreate(t, l, "After")
	var texts []string
	for _, it := range listAll(t, newLogAt(t, l.Dir())) {
		texts = append(texts, it.Text)
	}
	if !slices.Contains(texts, "Before") || !slices.Contains(texts, "After") {
		t.Errorf("items %q", texts)
	}
}

func TestStaleTempFilesSwept(t *testing.T) {
	fileOnly(t)
	l := newLog(t, newClock())
	mustCreate(t, l, "x")
	stale := filepath.Join(l.Dir(), ".threads.json.tmp-killed")
	if err := os.WriteFile(stale, []byte("half"), 0o644); err != nil {
		t.Fatal(err)
	}
	l2 := newLogAt(t, l.Dir())
	mustCreate(t, l2, "y")
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stale temporary file still there: %v", err)
	}
}

func TestLockTimeout(t *testing.T) {
	fileOnly(t)
	dir := t.TempDir()
	holder, err := Open(dir, &Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	unlock, _, err := holder.localFile().f.lock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	// Another Log (another open file, as another process would have)
	// waits, then gives up.
	l, err := Open(dir, &Options{NoSync: true, LockTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = l.Create(t.Context(), CreateOptions{Text: "blocked"})
	if !errors.Is(err, ErrLockTimeout) {
		t.Fatalf("err %v, want ErrLockTimeout", err)
	}
	if d := time.Since(start); d < 50*time.Millisecond || d > 5*time.Second {
		t.Errorf("gave up after %v", d)
	}
	// Reads take no lock.
	if _, err := l.List(t.Context(), ListOptions{}); err != nil {
		t.Errorf("list while locked: %v", err)
	}
}

func TestConcurrentGoroutines(t *testing.T) {
	fileOnly(t)
	l := newLog(t, newClock())
	other := newLogAt(t, l.Dir())
	errs := make(chan error, 40)
	for i := range 40 {
		go func() {
			target := l
			if i%2 == 1 {
				target = other
			}
			_, err := target.Create(t.Context(), CreateOptions{Text: fmt.Sprint("goroutine item ", i)})
			errs <- err
		}()
	}
	for range 40 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if got := listAll(t, l); len(got) != 40 {
		t.Errorf("%d items after 40 concurrent creates", len(got))
	}
}

func TestDuplicateIDsInFile(t *testing.T) {
	fileOnly(t)
	dir := t.TempDir()
	writeFile(t, dir, `[
  {"id": "t-00000001", "text": "First", "status": "open", "created_at": "2026-02-01T00:00:00.000Z"},
  {"id": "t-00000002", "text": "Second", "status": "open", "created_at": "2026-02-02T00:00:00.000Z"},
  {"id": "t-00000001", "text": "First, as a note", "status": "open", "created_at": "2026-02-03T00:00:00.000Z"}
]`)
	l := openLog(t, dir, newClock(), nil)
	res, err := l.List(t.Context(), ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(res.Threads); !slices.Equal(got, []string{"t-00000001", "t-00000002"}) || res.TotalOpen != 2 {
		t.Errorf("listed %v (%d open), want each id once", got, res.TotalOpen)
	}
	if r, err := l.Resolve(t.Context(), ResolveOptions{ID: "#2"}); err != nil || r.ResolvedThread.ID != "t-00000002" {
		t.Errorf("#2: %+v, %v", r, err)
	}
	if _, err := l.Resolve(t.Context(), ResolveOptions{TextMatch: "as a note"}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(string(readFile(t, l.localFile().f.path)), `"status": "resolved"`); got != 3 {
		t.Errorf("%d resolved copies in the file, want all 3", got)
	}
	if _, err := l.SessionStart(t.Context(), StartOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := string(readFile(t, l.localFile().f.path)); strings.Contains(got, "as a note") {
		t.Errorf("session_start kept the later copy:\n%s", got)
	}
}
