package main

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

// bigDocument writes the document of a thread of n messages, with history
// (in commits of 100), to a file and returns its path.
func bigDocument(t *testing.T, id string, n int) string {
	t.Helper()
	ctx := t.Context()
	db := thread.New(thread.NewMemoryStore(), nil)
	th, err := db.Create(ctx, thread.CreateOptions{ID: id, Kind: thread.KindLocal})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i += 100 {
		msgs := make([]message.Message, min(100, n-i))
		for j := range msgs {
			msgs[j] = message.User("hello")
		}
		if _, err := th.Append(ctx, msgs...); err != nil {
			t.Fatal(err)
		}
	}
	var doc bytes.Buffer
	if err := th.Save(ctx, &doc, thread.SaveOptions{History: true}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), id+".json")
	if err := os.WriteFile(path, doc.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestImportShowsAProgressBarOnATerminal(t *testing.T) {
	t.Parallel()
	doc := bigDocument(t, "th_big", 1200)
	r := loomWith(t, loomOpts{terminal: true}, "import", doc, "--store", sqliteStore(t)).ok(t)
	// A line per commit (12), and the last one again once written.
	if n := strings.Count(r.stdout, "\r"); n != 13 || !strings.HasPrefix(r.stdout, "\r[##") ||
		!strings.Contains(r.stdout, "100/1200 messages  1 commit ") ||
		!strings.Contains(r.stdout, "1200/1200 messages  12 commits  writing") ||
		!strings.HasSuffix(r.stdout, "] 1200/1200 messages  12 commits"+strings.Repeat(" ", 78-len("[########################] 1200/1200 messages  12 commits"))+"\nimported th_big (1200 messages)\n") {
		t.Errorf("import on a terminal (%d redraws) printed %q", n, r.stdout)
	}
	if r.stderr != "" {
		t.Errorf("stderr %q", r.stderr)
	}
}

// Off a terminal, with --json, or for a small document, import prints what
// it always did.
func TestImportShowsNoProgressBarOtherwise(t *testing.T) {
	t.Parallel()
	doc := bigDocument(t, "th_big", 1200)
	small := bigDocument(t, "th_small", importBarMin-1)
	for _, tc := range []struct {
		name     string
		terminal bool
		args     []string
		want     string
	}{
		{"not a terminal", false, []string{"import", doc}, "imported th_big (1200 messages)\n"},
		{"json", true, []string{"import", doc, "--json"}, ""},
		{"small", true, []string{"import", small}, "imported th_small (999 messages)\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := loomWith(t, loomOpts{terminal: tc.terminal}, append(tc.args, "--store", sqliteStore(t))...).ok(t)
			if strings.Contains(r.stdout, "\r") || r.stderr != "" || (tc.want != "" && r.stdout != tc.want) {
				t.Errorf("stdout %q, stderr %q; want stdout %q", r.stdout, r.stderr, tc.want)
			}
			if tc.want == "" {
				var rec recordJSON
				r.decode(t, &rec)
				if rec.ID != "th_big" {
					t.Errorf("import --json = %+v", rec)
				}
			}
		})
	}
}

// oldFileStore returns the URL of a copy of the jsonfile store that the
// release before tenant namespaces wrote (jsonfile's migration fixture),
// which migrates as it opens, and the number of its thread files.
func oldFileStore(t *testing.T) (string, int) {
	t.Helper()
	const fixture = "../../jsonfile/testdata/release-26c53b2"
	dir := filepath.Join(t.TempDir(), "store")
	err := os.CopyFS(dir, os.DirFS(fixture))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"commits", "refs", "threads", "history"} { // empty ones git does not keep
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	files, err := fs.Glob(os.DirFS(dir), "threads/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("thread files %v, %v", files, err)
	}
	return "file://" + dir, len(files)
}

func TestMigrationShowsAProgressBarOnATerminal(t *testing.T) {
	t.Parallel()
	store, n := oldFileStore(t)
	r := loomWith(t, loomOpts{terminal: true}, "threads", "list", "--store", store).ok(t)
	last := fmt.Sprintf("%s %d/%d threads (tenant keys)", progressBar(n, n, 24), n, n)
	if strings.Count(r.stderr, "\r") != n || !strings.HasPrefix(r.stderr, "\rmigrating "+store+": [##") ||
		!strings.Contains(r.stderr, last) || !strings.HasSuffix(r.stderr, "\n") ||
		strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("a migration on a terminal drew %q", r.stderr)
	}
	if !strings.Contains(r.stdout, "rich-fork") || strings.Contains(r.stdout, "migrating") {
		t.Errorf("stdout %q", r.stdout)
	}
	// Migrated: the next open draws nothing.
	if r := loomWith(t, loomOpts{terminal: true}, "threads", "list", "--store", store).ok(t); r.stderr != "" {
		t.Errorf("the second open drew %q", r.stderr)
	}
}

func TestMigrationShowsNoProgressBarOffATerminal(t *testing.T) {
	t.Parallel()
	store, _ := oldFileStore(t)
	want := loom(t, "threads", "list", "--store", store).ok(t)
	if want.stderr != "" {
		t.Errorf("a migration off a terminal wrote %q to stderr", want.stderr)
	}
}

// With --json there are no bars, on a terminal too (the package doc says
// so): a migration draws nothing on stderr.
func TestMigrationShowsNoProgressBarWithJSON(t *testing.T) {
	t.Parallel()
	store, _ := oldFileStore(t)
	r := loomWith(t, loomOpts{terminal: true}, "threads", "list", "--json", "--store", store).ok(t)
	if strings.Contains(r.stderr, "\r") || strings.Contains(r.stderr, "migrating") {
		t.Errorf("with --json a migration drew %q on stderr", r.stderr)
	}
}
