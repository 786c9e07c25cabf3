package jsonfile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/store"
)

func TestNewerSchemaRefused(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, nil)
	s.Close()
	b, err := os.ReadFile(filepath.Join(dir, "loom.json"))
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf(`"schema": %d`, SchemaVersion); !strings.Contains(string(b), want) {
		t.Fatalf("loom.json %s lacks %s", b, want)
	}
	newer := fmt.Sprintf(`{"format": %q, "schema": %d}`, formatName, SchemaVersion+1)
	if err := os.WriteFile(filepath.Join(dir, "loom.json"), []byte(newer), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Open(t.Context(), dir, nil)
	if !errors.Is(err, thread.ErrUnsupported) || !strings.Contains(err.Error(), "newer") {
		t.Fatalf("open a newer store: %v, want a clear ErrUnsupported", err)
	}
	_, err = thread.Open(t.Context(), "file://"+dir, nil)
	if !errors.Is(err, thread.ErrUnsupported) {
		t.Fatalf("thread.Open a newer store: %v", err)
	}
	// Nor is a directory that another program's loom.json claims.
	if err := os.WriteFile(filepath.Join(dir, "loom.json"), []byte(`{"format":"other","schema":1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(t.Context(), dir, nil); !errors.Is(err, thread.ErrInvalid) {
		t.Fatalf("open a foreign loom.json: %v", err)
	}
}

func TestMigrateFromNothing(t *testing.T) {
	// Schema 0 is an empty directory (or one without loom.json): Open
	// brings it to SchemaVersion.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := openTest(t, dir, nil)
	for _, d := range []string{"commits", "refs", "threads", "history"} {
		if fi, err := os.Stat(filepath.Join(dir, d)); err != nil || !fi.IsDir() {
			t.Fatalf("%s after migration: %v", d, err)
		}
	}
	if len(migrations) != SchemaVersion {
		t.Fatalf("%d migrations for schema %d", len(migrations), SchemaVersion)
	}
	s.Close()
	// Opening again migrates nothing and keeps what is there.
	openTest(t, dir, nil)
	if b, _ := os.ReadFile(filepath.Join(dir, "notes.txt")); string(b) != "mine" {
		t.Fatal("open changed a file that is not the store's")
	}
}

func TestParseURL(t *testing.T) {
	for _, c := range []struct {
		url, dir string
		nosync   bool
		bad      bool
	}{
		{url: "file:///var/lib/loom", dir: "/var/lib/loom"},
		{url: "file://data/loom", dir: "data/loom"},
		{url: "file://./data", dir: "./data"},
		{url: "file://data", dir: "data"},
		{url: "file:data", dir: "data"},
		{url: "file:///tmp/x?nosync=true", dir: "/tmp/x", nosync: true},
		{url: "file:///tmp/x?nosync=0", dir: "/tmp/x"},
		{url: "file:///tmp/x?nosync=maybe", bad: true},
		{url: "file:///tmp/x?cache=1", bad: true},
		{url: "file://", bad: true},
		{url: "file://u:p@host/x", bad: true},
		{url: "sqlite:///x", bad: true},
	} {
		u, err := url.Parse(c.url)
		if err != nil {
			t.Fatal(err)
		}
		dir, opts, err := ParseURL(u)
		if c.bad {
			if !errors.Is(err, thread.ErrInvalid) {
				t.Errorf("%s: %v, want ErrInvalid", c.url, err)
			}
			continue
		}
		if err != nil || dir != c.dir || opts.NoSync != c.nosync {
			t.Errorf("%s: %q %+v %v, want %q nosync=%v", c.url, dir, opts, err, c.dir, c.nosync)
		}
	}
}

func TestOpenURL(t *testing.T) {
	ctx := t.Context()
	t.Chdir(t.TempDir())
	db, err := thread.Open(ctx, "file://rel/store?nosync=1", nil)
	if err != nil {
		t.Fatal(err)
	}
	th, err := db.Create(ctx, thread.CreateOptions{ID: "t1", Messages: []message.Message{message.User("hi")}})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := os.Stat(filepath.Join("rel", "store", "threads", "t1.json")); err != nil {
		t.Fatalf("the thread file is not where the url says: %v", err)
	}
	abs, err := filepath.Abs(filepath.Join("rel", "store"))
	if err != nil {
		t.Fatal(err)
	}
	db, err = thread.Open(ctx, "file://"+abs, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	again, err := db.Thread(ctx, "t1")
	if err != nil {
		t.Fatal(err)
	}
	if again.Record().Head != th.Record().Head {
		t.Fatal("the absolute url opened another store")
	}
}

// TestLeftovers: what a crash leaves behind (temporary files, commit files
// that no batch committed, history chunks of a thread since deleted) breaks
// no read and no write.
func TestLeftovers(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	s := openTest(t, dir, nil)
	db := thread.New(s, nil)
	th, err := db.Create(ctx, thread.CreateOptions{ID: "a", Messages: []message.Message{message.User("one")}})
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, data string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("threads/.tmp-x1-b.json", `{"id":"b","kind":"loc`) // half a thread file
	write("commits/.tmp-x2-c_half.json", `{"id":"c_ha`)
	write("commits/c_orphan.json", `{"id":"c_orphan","depth":1,"messages":[]}`) // written, never committed
	write("history/zz/0.json", `{"thread":"zz","history":[]}`)                  // a deleted thread's chunk
	write("threads/notes.txt", "not a thread")
	write("refs/.tmp-x3-c_x", "1")
	write(".tmp-x4-loom.json", `{"format":`)
	write("history/a/.tmp-x5-0.json", `{"thread":"a","hist`)
	write("history/.tmp-x6-0.json", `{"thread":"a","hist`)

	var ids []string
	for r, err := range s.Threads(ctx, thread.ListOptions{AllTenants: true}) {
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.ID)
	}
	if !slices.Equal(ids, []string{"a"}) {
		t.Fatalf("threads %v, want [a]", ids)
	}
	msgs, err := th.Messages(ctx, thread.ReadOptions{})
	if err != nil || len(msgs) != 1 {
		t.Fatalf("read: %v %v", msgs, err)
	}
	// Reopening removes the temporary files, and nothing else.
	s.Close()
	s = openTest(t, dir, nil)
	db = thread.New(s, nil)
	if th, err = db.Thread(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"threads/.tmp-x1-b.json", "commits/.tmp-x2-c_half.json", "refs/.tmp-x3-c_x",
		".tmp-x4-loom.json", "history/a/.tmp-x5-0.json", "history/.tmp-x6-0.json"} {
		if _, err := os.Stat(filepath.Join(dir, name)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s after reopen: %v", name, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "threads/notes.txt")); err != nil {
		t.Errorf("reopen removed a file that is not a temporary one: %v", err)
	}
	// The orphan is not a stored commit: a batch may write that id.
	c := &thread.Commit{ID: "c_orphan", Depth: 1, Op: thread.OpAppend, Messages: []message.Message{message.User("real")}}
	if err := s.Apply(ctx, &store.Batch{Commits: []*thread.Commit{c}}); err != nil {
		t.Fatalf("write over an uncommitted commit file: %v", err)
	}
	got, err := s.Commit(ctx, "c_orphan")
	if err != nil || got.Messages[0].Text() != "real" {
		t.Fatalf("commit after overwrite: %v %v", got, err)
	}
	// A thread named like the stale chunk's gets its own history.
	zz, err := db.Create(ctx, thread.CreateOptions{ID: "zz"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range historyChunk + 3 {
		if _, err := zz.Append(ctx, message.User(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	n := 0
	for e, err := range zz.History(ctx, thread.HistoryOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		if e.Version != zz.Version()-int64(n) {
			t.Fatalf("history entry %d is version %d", n, e.Version)
		}
		n++
	}
	if n != historyChunk+4 {
		t.Fatalf("%d history entries", n)
	}
	// A reader that read zz's file just before zz was deleted and made
	// again may find the new thread's chunk, or a stale one, in place of
	// the one the file names: readChunk tells, and History fails with
	// ErrNotFound rather than yield another thread's entries (or panic).
	good, err := os.ReadFile(filepath.Join(dir, "history/zz/0.json"))
	if err != nil {
		t.Fatal(err)
	}
	var other []string
	for i := range historyChunk {
		other = append(other, fmt.Sprintf(`{"version":%d,"op":"append","time":"2025-01-01T00:00:00Z"}`, i+1))
	}
	for _, stale := range []string{
		`{"thread":"zz","history":[]}`,
		`{"thread":"yy","history":[` + strings.Join(other, ",") + `]}`,
		strings.Replace(string(good), `"version": 1,`, `"version": 65,`, 1),
	} {
		write("history/zz/0.json", stale)
		var last error
		for _, err := range zz.History(ctx, thread.HistoryOptions{}) {
			last = err
		}
		if !errors.Is(last, thread.ErrNotFound) {
			t.Errorf("history over the stale chunk %.40s…: %v, want ErrNotFound", stale, last)
		}
	}
}

// TestIntentIsFinished: a batch whose intent is durable is committed, even
// if the process stops before doing it; the next Open, Apply or read of any
// process finishes it, and no reader sees it half done.
func TestIntentIsFinished(t *testing.T) {
	ctx := t.Context()
	for _, finish := range []string{"open", "apply", "read"} {
		t.Run(finish, func(t *testing.T) {
			dir := t.TempDir()
			s := openTest(t, dir, nil)
			db := thread.New(s, nil)
			a, err := db.Create(ctx, thread.CreateOptions{ID: "a", Messages: []message.Message{message.User("a0")}})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := db.Create(ctx, thread.CreateOptions{ID: "b"}); err != nil {
				t.Fatal(err)
			}
			crash := errors.New("crash")
			s.testHooks.afterIntent = func() error { return crash }
			// A batch over two threads and a delete: several files.
			head, err := s.Commit(ctx, a.Record().Head)
			if err != nil {
				t.Fatal(err)
			}
			c := &thread.Commit{ID: "c_new", Parent: head.ID, Depth: 2, Op: thread.OpAppend, Messages: []message.Message{message.User("a1")}}
			err = s.Apply(ctx, &store.Batch{Commits: []*thread.Commit{c}, Moves: []store.Move{
				{Thread: "a", From: 1, Head: c.ID, Op: thread.OpAppend},
			}, Delete: []store.Deletion{{Thread: "b"}}})
			if !errors.Is(err, crash) {
				t.Fatalf("apply: %v", err)
			}
			if fi, err := os.Stat(filepath.Join(dir, "intent.json")); err != nil || fi.Size() == 0 {
				t.Fatalf("no intent after the crash: %v", err)
			}
			s.testHooks.afterIntent = nil
			switch finish {
			case "open":
				s.Close()
				s = openTest(t, dir, nil)
			case "apply":
				if _, err := db.Create(ctx, thread.CreateOptions{ID: "c"}); err != nil {
					t.Fatal(err)
				}
			case "read":
				// A reader of the untouched thread b finishes the batch
				// first, so it sees b deleted along with a's move.
				if _, err := s.Thread(ctx, "b"); !errors.Is(err, thread.ErrNotFound) {
					t.Fatalf("b read after the crash: %v", err)
				}
			}
			if fi, err := os.Stat(filepath.Join(dir, "intent.json")); err != nil || fi.Size() != 0 {
				t.Fatalf("intent still there: %v", err)
			}
			r, err := s.Thread(ctx, "a")
			if err != nil || r.Version != 2 || r.Head != "c_new" {
				t.Fatalf("after finishing: %+v %v", r, err)
			}
			if _, err := s.Thread(ctx, "b"); !errors.Is(err, thread.ErrNotFound) {
				t.Fatalf("b after finishing: %v", err)
			}
		})
	}
}

// TestFailedWriteChangesNothing: a disk error before the commit point
// leaves the store as it was.
func TestFailedWriteChangesNothing(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	s := openTest(t, dir, nil)
	db := thread.New(s, nil)
	th, err := db.Create(ctx, thread.CreateOptions{ID: "a", Messages: []message.Message{message.User("a0")}})
	if err != nil {
		t.Fatal(err)
	}
	for _, failOn := range []string{"commits", "intent"} {
		s.testHooks.sync = func(name string) error {
			if strings.Contains(name, failOn) {
				return errors.New("disk full")
			}
			return nil
		}
		if _, err := th.Append(ctx, message.User("lost")); err == nil {
			t.Fatalf("append with a failing %s sync succeeded", failOn)
		}
		id := "c_lost_" + failOn
		c := &thread.Commit{ID: id, Parent: th.Record().Head, Depth: 2, Op: thread.OpAppend, Messages: []message.Message{message.User("lost")}}
		if err := s.Apply(ctx, &store.Batch{Commits: []*thread.Commit{c}, Moves: []store.Move{{Thread: "a", From: 1, Head: id, Op: thread.OpAppend}}}); err == nil {
			t.Fatalf("apply with a failing %s sync succeeded", failOn)
		}
		if _, err := s.Commit(ctx, id); !errors.Is(err, thread.ErrNotFound) {
			t.Fatalf("the commit of a batch that failed on %s: %v, want ErrNotFound", failOn, err)
		}
	}
	s.testHooks.sync = nil
	s.Close()
	s = openTest(t, dir, nil)
	for _, id := range []string{"c_lost_commits", "c_lost_intent"} {
		if _, err := s.Commit(ctx, id); !errors.Is(err, thread.ErrNotFound) {
			t.Fatalf("after reopen, the commit of a failed batch: %v, want ErrNotFound", err)
		}
	}
	if n := count(t, dir, "commits"); n != 1 {
		t.Fatalf("%d files in commits/, want the one commit stored", n)
	}
	th, err = thread.New(s, nil).Thread(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := th.Messages(ctx, thread.ReadOptions{})
	if err != nil || th.Version() != 1 || len(msgs) != 1 {
		t.Fatalf("after failed writes: version %d, %d messages, %v", th.Version(), len(msgs), err)
	}
	if _, err := th.Append(ctx, message.User("a1")); err != nil {
		t.Fatal(err)
	}
}

// TestDeleteFreesFiles: deleting every thread leaves no commit, refs,
// thread or history file.
func TestDeleteFreesFiles(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	s := openTest(t, dir, &Options{NoSync: true})
	db := thread.New(s, nil)
	a, err := db.Create(ctx, thread.CreateOptions{ID: "a"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2*historyChunk + 5 {
		if _, err := a.Append(ctx, message.User(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.Checkpoint(ctx, "cp"); err != nil {
		t.Fatal(err)
	}
	f, err := a.Fork(ctx, thread.ForkOptions{ID: "f", Version: 50})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Append(ctx, message.User("f")); err != nil {
		t.Fatal(err)
	}
	// History pages across sealed chunks.
	var got []int64
	for e, err := range a.History(ctx, thread.HistoryOptions{Before: historyChunk + 2, Limit: 3}) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, e.Version)
	}
	if want := []int64{historyChunk + 1, historyChunk, historyChunk - 1}; !slices.Equal(got, want) {
		t.Fatalf("history page %v, want %v", got, want)
	}
	if err := a.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if n := count(t, dir, "commits"); n != 50 {
		t.Fatalf("%d commits after deleting a, want the 50 that f reaches", n)
	}
	if err := f.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"commits", "refs", "threads", "history"} {
		if n := count(t, dir, d); n != 0 {
			t.Fatalf("%d files left in %s", n, d)
		}
	}
}

func count(t *testing.T, dir, sub string) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(filepath.Join(dir, sub), func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != filepath.Join(dir, sub) {
			n++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestClosed: a closed store refuses writes.
func TestClosed(t *testing.T) {
	s := openTest(t, t.TempDir(), nil)
	s.Close()
	if err := s.Apply(context.Background(), &store.Batch{}); err == nil {
		t.Fatal("apply on a closed store")
	}
}

// TestBytesRoundTrip: state values and commit fields come back byte for
// byte, HTML characters and odd numbers included, and times keep their
// zone and nanoseconds on commits and read back in UTC on records.
func TestBytesRoundTrip(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	s := openTest(t, dir, nil)
	state := map[string]json.RawMessage{"k": json.RawMessage(`{"html":"<b>&amp;</b>","n":1e400,"u":"\u2028"}`), "e": json.RawMessage(`[]`)}
	at := time.Date(2025, 1, 2, 3, 4, 5, 123456789, time.FixedZone("x", -7200))
	c := &thread.Commit{ID: "c1", Depth: 0, Op: thread.OpState, Time: at, State: state, StateFrom: "c1", Metadata: map[string]string{"run": "<r1>"}}
	empty := &thread.Commit{ID: "c2", Parent: "c1", Op: thread.OpState, Time: at, State: map[string]json.RawMessage{}, StateFrom: "c2"}
	created := time.Date(2025, 1, 2, 3, 4, 5, 123456000, time.FixedZone("y", 3600))
	rec := &thread.Record{ID: "t", Kind: thread.KindLocal, Head: "c2", Version: 1, CreatedAt: created, UpdatedAt: created}
	if err := s.Apply(ctx, &store.Batch{Commits: []*thread.Commit{c, empty}, Create: []store.Creation{{Record: rec, Op: thread.OpCreate}}}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = openTest(t, dir, nil)
	got, err := s.Commit(ctx, "c1")
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range state {
		if string(got.State[k]) != string(v) {
			t.Errorf("state %s: %s, want %s", k, got.State[k], v)
		}
	}
	if !got.Time.Equal(at) || got.Time.Format(time.RFC3339Nano) != at.Format(time.RFC3339Nano) || got.Metadata["run"] != "<r1>" {
		t.Errorf("commit read back as %+v", got)
	}
	got2, err := s.Commit(ctx, "c2")
	if err != nil || got2.State == nil || len(got2.State) != 0 {
		t.Errorf("an empty state read back as %#v (%v), want an empty map", got2.State, err)
	}
	r, err := s.Thread(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	if !r.CreatedAt.Equal(created) || r.CreatedAt.Location() != time.UTC {
		t.Errorf("created_at read back as %v", r.CreatedAt)
	}
}
