package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loomthreads/loom/thread"
)

func TestQuickstart(t *testing.T) {
	var out bytes.Buffer
	path := filepath.Join(t.TempDir(), "thread.json")
	if err := run(t.Context(), &out, "memory://", path); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Booked the 09:10.",
		"Booked the 13:40.",
		"after rollback (version 5):\n  assistant There are trains at 09:10 and 13:40.",
		"time travel to version 4:\n  assistant Booked the 09:10.",
		"v5 rollback",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	doc, err := os.ReadFile(path)
	if err != nil || !bytes.Contains(doc, []byte(`"format": "loom.thread/v1"`)) {
		t.Fatalf("saved document: %v %.80s", err, doc)
	}
}

func TestQuickstartOnSQLiteTwice(t *testing.T) {
	url := "sqlite://" + filepath.Join(t.TempDir(), "quick.db")
	for i := range 2 {
		var out bytes.Buffer
		if err := run(t.Context(), &out, url, ""); err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
	}
	// Both runs' threads are in the file: a thread and its fork each.
	db, err := thread.Open(t.Context(), url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	n := 0
	for _, err := range db.Threads(t.Context(), thread.ListOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != 4 {
		t.Fatalf("%d threads after two runs, want 4", n)
	}
}
