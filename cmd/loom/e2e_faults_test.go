package main

// End-to-end fault tests: `loom serve` on PostgreSQL or Redis behind a
// fault proxy (internal/faultproxy) that black-holes and refuses the
// store's port, and on a JSON-file store whose disk is full.

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/loomthreads/loom/internal/faultproxy"
	"github.com/loomthreads/loom/internal/testserver"
	"github.com/loomthreads/loom/internal/testwait"
)

// storeDeadline is the store's deadline the fault tests give loom serve
// (the store URL's connect_timeout and timeout), short so that they run
// in seconds; answerLimit is how long a request may take to answer during
// an outage: the deadline, with room for a slow machine.
const (
	storeDeadline = time.Second
	answerLimit   = 10 * storeDeadline
)

func TestServeStoreOutagePostgres(t *testing.T) {
	serveStoreOutage(t, testserver.Postgres(t), "PostgreSQL")
}

func TestServeStoreOutageRedis(t *testing.T) {
	serveStoreOutage(t, testserver.Redis(t), "Redis")
}

// reply is an answer of the server during the test.
type reply struct {
	status     int
	code, msg  string
	retryAfter string
	elapsed    time.Duration
	err        error
}

// do makes a request without a key (the server listens on loopback) with
// a client that gives up after answerLimit.
func do(method, u string, body any) reply {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, u, rd)
	if err != nil {
		return reply{err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	start := time.Now()
	resp, err := (&http.Client{Timeout: answerLimit}).Do(req)
	if err != nil {
		return reply{err: err, elapsed: time.Since(start)}
	}
	defer resp.Body.Close()
	var e struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	raw, _ := io.ReadAll(resp.Body)
	json.Unmarshal(raw, &e)
	return reply{status: resp.StatusCode, code: e.Error.Code, msg: e.Error.Message, retryAfter: resp.Header.Get("Retry-After"), elapsed: time.Since(start)}
}

// serveStoreOutage: with the store's port black-holed, and then refused,
// every request — reads and writes, in flight when the fault began and new
// — answers 503 unavailable with Retry-After, naming the store and no
// address, within answerLimit; after healing the same process serves
// again, and every append it acknowledged, before, around and after the
// outage, reads back.
func serveStoreOutage(t *testing.T, storeURL, name string) {
	p, proxied := faultproxy.StartStore(t, storeURL, storeDeadline)
	s := startServer(t, proxied)
	api := s.url + "/v1"

	var th threadOut
	if code, _ := call(t, "POST", api+"/threads", "", map[string]any{"title": "outage"}, &th); code != 201 {
		t.Fatalf("create: %d", code)
	}
	var (
		mu    sync.Mutex
		acked []string
		n     int
	)
	appendOne := func(phase string) reply {
		mu.Lock()
		n++
		text := fmt.Sprintf("%s %d", phase, n)
		mu.Unlock()
		r := do("POST", api+"/threads/"+th.ID+"/messages", map[string]any{"messages": []any{userMsg(text)}})
		if r.status == 201 {
			mu.Lock()
			acked = append(acked, text)
			mu.Unlock()
		}
		return r
	}
	requests := map[string]func(phase string) reply{
		"list":   func(string) reply { return do("GET", api+"/threads", nil) },
		"get":    func(string) reply { return do("GET", api+"/threads/"+th.ID, nil) },
		"read":   func(string) reply { return do("GET", api+"/threads/"+th.ID+"/messages", nil) },
		"append": appendOne,
		"create": func(string) reply { return do("POST", api+"/threads", map[string]any{"title": "new"}) },
	}
	// fire makes every request, rounds times over, all at once.
	fire := func(phase string, rounds int) map[string][]reply {
		var wg sync.WaitGroup
		out := map[string][]reply{}
		for what, f := range requests {
			for range rounds {
				wg.Go(func() {
					r := f(phase)
					mu.Lock()
					out[what] = append(out[what], r)
					mu.Unlock()
				})
			}
		}
		wg.Wait()
		return out
	}
	unavailable := func(fault, what string, r reply) {
		t.Helper()
		switch {
		case r.err != nil:
			t.Errorf("%s: %s: no answer: %v", fault, what, r.err)
		case r.status != 503 || r.code != "unavailable":
			t.Errorf("%s: %s: %d %s %q, want 503 unavailable", fault, what, r.status, r.code, r.msg)
		case r.retryAfter == "":
			t.Errorf("%s: %s: 503 without Retry-After", fault, what)
		case !strings.HasPrefix(r.msg, "the store is unavailable: ") || !strings.Contains(r.msg, name) || strings.Contains(r.msg, "127.0.0.1"):
			t.Errorf("%s: %s: message %q, want the cause, naming %s and no address", fault, what, r.msg, name)
		}
	}
	for _, fault := range []struct {
		name string
		make func()
	}{{"black hole", p.Blackhole}, {"down", p.Down}} {
		// Before the fault: a loaded machine may miss the short deadline
		// now and then (503, the same answer an outage gets), so each
		// append is tried until it is acknowledged or answerLimit passes.
		for range 3 {
			var r reply
			testwait.Within(answerLimit, func() bool {
				r = appendOne("before " + fault.name)
				return r.status != 503
			})
			if r.status != 201 {
				t.Fatalf("append before %s: %+v", fault.name, r)
			}
		}
		// In flight: requests whose bytes are on their way to or from the
		// store (the proxy delays them) when the fault begins.
		p.Delay(time.Hour)
		var wg sync.WaitGroup
		var inflight map[string][]reply
		wg.Go(func() { inflight = fire("in flight "+fault.name, 1) })
		if !testwait.Within(answerLimit, func() bool { return p.Held() != 0 }) {
			t.Fatalf("%s: no request reached the store", fault.name)
		}
		fault.make()
		wg.Wait()
		for what, rs := range inflight {
			for _, r := range rs {
				unavailable(fault.name, what+" in flight", r)
			}
		}
		// New requests during the outage.
		for what, rs := range fire("during "+fault.name, 2) {
			for _, r := range rs {
				unavailable(fault.name, what, r)
			}
		}
		if r := do("GET", s.url+"/healthz", nil); r.status != 503 {
			t.Errorf("%s: /healthz %d, want 503", fault.name, r.status)
		}
		p.Heal()
		// The same process serves again, without a restart.
		var r reply
		if !testwait.Within(answerLimit, func() bool {
			r = appendOne("after " + fault.name)
			return r.status == 201
		}) {
			t.Fatalf("after %s healed: %+v", fault.name, r)
		}
	}
	var msgs messagesOut
	if code, _ := call(t, "GET", api+"/threads/"+th.ID+"/messages", "", nil, &msgs); code != 200 {
		t.Fatalf("read back: %d", code)
	}
	have := map[string]bool{}
	for _, text := range msgs.texts() {
		have[text] = true
	}
	for _, a := range acked {
		if !have[a] {
			t.Errorf("acknowledged append %q lost", a)
		}
	}
	t.Logf("%d appends acknowledged, all read back", len(acked))
	s.stop(t)
}

// TestServeFullDiskJSONFile: `loom serve` on a JSON-file store whose disk
// is full starts, serves reads — a committed batch it cannot finish
// included, read whole — answers writes 507 insufficient_storage saying
// the store is read-only until space is freed, logs so, and takes writes
// again once there is room, without a restart. The disk is a small tmpfs:
// mounting one needs root.
func TestServeFullDiskJSONFile(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipping: mounting a small tmpfs as a full disk needs root; jsonfile's TestFullDisk* inject the same failures")
	}
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("skipping: cannot mount a tmpfs (%v: %s); jsonfile's TestFullDisk* inject the same failures", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", mnt).Run() })
	dir := filepath.Join(mnt, "store")
	store := "file://" + dir
	api := func(s *server) string { return s.url + "/v1" }

	s := startServer(t, store)
	var th threadOut
	if code, _ := call(t, "POST", api(s)+"/threads", "", map[string]any{"title": "full"}, &th); code != 201 {
		t.Fatalf("create: %d", code)
	}
	for _, text := range []string{"one", "two"} {
		if code, _ := call(t, "POST", api(s)+"/threads/"+th.ID+"/messages", "", map[string]any{"messages": []any{userMsg(text)}}, nil); code != 201 {
			t.Fatalf("append %s: %d", text, code)
		}
	}
	s.stop(t)

	// A batch committed (its intent durable) that the disk then had no
	// room to finish: the thread's file rewritten with a new title and
	// made big by white space, as a process that crashed there leaves it.
	tf := filepath.Join(dir, "threads", th.ID+".json")
	old, err := os.ReadFile(tf)
	if err != nil {
		t.Fatal(err)
	}
	var rec map[string]any
	if err := json.Unmarshal(old, &rec); err != nil {
		t.Fatal(err)
	}
	rec["title"] = "pending"
	b, _ := json.Marshal(rec)
	data, _ := json.Marshal(map[string]any{"ops": []any{map[string]any{"path": "threads/" + th.ID + ".json", "data": string(b) + strings.Repeat(" ", 300<<10) + "\n"}}})
	sum := sha256.Sum256(data)
	if err := os.WriteFile(filepath.Join(dir, "intent.json"), append([]byte(hex.EncodeToString(sum[:])+"\n"), data...), 0o600); err != nil {
		t.Fatal(err)
	}
	fill := filepath.Join(mnt, "fill")
	f, err := os.Create(fill)
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := f.Write(make([]byte, 4096)); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			break
		}
	}
	f.Close()

	s = startServer(t, store)
	if !strings.Contains(s.stderr.String(), "read-only") {
		t.Errorf("the log does not say the store is read-only:\n%s", s.stderr.String())
	}
	var got struct{ Title string }
	if code, _ := call(t, "GET", api(s)+"/threads/"+th.ID, "", nil, &got); code != 200 || got.Title != "pending" {
		t.Fatalf("read on the full disk: %d %+v, want the committed title", code, got)
	}
	var msgs messagesOut
	if code, _ := call(t, "GET", api(s)+"/threads/"+th.ID+"/messages", "", nil, &msgs); code != 200 || len(msgs.Messages) != 2 {
		t.Fatalf("messages on the full disk: %d %v", code, msgs.texts())
	}
	for what, r := range map[string]reply{
		"append": do("POST", api(s)+"/threads/"+th.ID+"/messages", map[string]any{"messages": []any{userMsg("three")}}),
		"create": do("POST", api(s)+"/threads", map[string]any{"title": "new"}),
	} {
		if r.status != 507 || r.code != "insufficient_storage" || !strings.Contains(r.msg, "read-only until space is freed") || strings.Contains(r.msg, dir) {
			t.Errorf("%s on the full disk: %d %s %q, want 507 insufficient_storage saying it is read-only, no path", what, r.status, r.code, r.msg)
		}
	}
	// Room again: writes work, without a restart, and the pending batch
	// is finished first.
	if err := os.Remove(fill); err != nil {
		t.Fatal(err)
	}
	if code, _ := call(t, "POST", api(s)+"/threads/"+th.ID+"/messages", "", map[string]any{"messages": []any{userMsg("three")}}, nil); code != 201 {
		t.Fatalf("append once there is room: %d", code)
	}
	if code, _ := call(t, "GET", api(s)+"/threads/"+th.ID+"/messages", "", nil, &msgs); code != 200 || strings.Join(msgs.texts(), " ") != "one two three" {
		t.Fatalf("messages once there is room: %d %v", code, msgs.texts())
	}
	if code, _ := call(t, "GET", api(s)+"/threads/"+th.ID, "", nil, &got); code != 200 || got.Title != "pending" {
		t.Fatalf("title once there is room: %d %+v", code, got)
	}
	s.stop(t)
}
