package worklog

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// The multi-process test re-executes the test binary: each child runs
// only TestChildCreate, which creates items in the directory the parent
// names and prints the id of each, once it is written.

const envChild = "LOOM_WORKLOG_CHILD"

type childSpec struct {
	Dir    string `json:"dir"`
	Writer string `json:"writer"`
	Count  int    `json:"count"`
}

func TestChildCreate(t *testing.T) {
	raw := os.Getenv(envChild)
	if raw == "" {
		t.Skip("runs only as a child process of TestProcessesLoseNothing")
	}
	var s childSpec
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		t.Fatal(err)
	}
	// fsync on: the writes are the real ones.
	l, err := Open(s.Dir, &Options{LockTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for i := range s.Count {
		if i%5 == 4 {
			// Resolutions race with creations too.
			if _, err := l.Resolve(t.Context(), ResolveOptions{TextMatch: fmt.Sprintf("item %s-%d.", s.Writer, i-1)}); err != nil {
				t.Fatalf("resolve %d: %v", i, err)
			}
		}
		res, err := l.Create(t.Context(), CreateOptions{Text: fmt.Sprintf("item %s-%d.", s.Writer, i)})
		if err != nil {
			t.Fatalf("create %d: %v", i, err)
		}
		fmt.Printf("ack %s\n", res.Thread.ID)
	}
}

func TestProcessesLoseNothing(t *testing.T) {
	fileOnly(t)
	if testing.Short() {
		t.Skip("starts processes")
	}
	const procs, each = 4, 25
	dir := t.TempDir()
	type child struct {
		cmd *exec.Cmd
		out bytes.Buffer
		err bytes.Buffer
	}
	children := make([]*child, procs)
	for p := range procs {
		spec, _ := json.Marshal(childSpec{Dir: dir, Writer: fmt.Sprint("p", p), Count: each})
		c := &child{cmd: exec.Command(os.Args[0], "-test.run=^TestChildCreate$", "-test.count=1", "-test.v=false")}
		c.cmd.Env = append(os.Environ(), envChild+"="+string(spec))
		c.cmd.Stdout, c.cmd.Stderr = &c.out, &c.err
		if err := c.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		children[p] = c
	}
	failed := false
	for p, c := range children {
		if err := c.cmd.Wait(); err != nil {
			t.Errorf("child %d: %v\n%s%s", p, err, c.out.String(), c.err.String())
			failed = true
		}
	}
	if failed {
		t.FailNow()
	}
	acked := map[string]bool{}
	for p, c := range children {
		sc := bufio.NewScanner(&c.out)
		n := 0
		for sc.Scan() {
			if id, ok := strings.CutPrefix(sc.Text(), "ack "); ok {
				acked[id] = true
				n++
			}
		}
		if n != each {
			t.Fatalf("child %d acknowledged %d creates, want %d:\n%s", p, n, each, c.err.String())
		}
	}
	l := openLog(t, dir, newClock(), nil)
	items := listAll(t, l)
	have := map[string]Item{}
	for _, it := range items {
		if _, dup := have[it.ID]; dup {
			t.Errorf("item %s twice", it.ID)
		}
		have[it.ID] = it
	}
	for id := range acked {
		if _, ok := have[id]; !ok {
			t.Errorf("acknowledged item %s is lost", id)
		}
	}
	resolvedN := 0
	for _, it := range items {
		if !it.Open() {
			resolvedN++
		}
	}
	if len(items) != procs*each || resolvedN != procs*(each/5) {
		t.Errorf("%d items, %d resolved; want %d and %d", len(items), resolvedN, procs*each, procs*(each/5))
	}
}
