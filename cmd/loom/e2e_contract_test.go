package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/loomthreads/loom/internal/testserver"
)

// rawCall sends body as it is (bytes that need not be JSON, or UTF-8) and
// returns the status and the error body's code and message.
func rawCall(t *testing.T, method, url, body string) (status int, code, msg string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+keyAcme)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var e struct {
		Error struct{ Code, Message string }
	}
	json.Unmarshal(data, &e)
	for _, g := range []string{"Go struct", "Go value", "httpapi.", "is its package imported"} {
		if strings.Contains(string(data), g) {
			t.Errorf("%s %s: the answer speaks Go: %s", method, url, data)
		}
	}
	return resp.StatusCode, e.Error.Code, e.Error.Message
}

// TestContractEndToEnd drives a real `loom serve` on PostgreSQL with what
// a client gets wrong — a body of the wrong shape, a message in another
// API's shape, text that is not UTF-8, a misspelt query parameter — and
// with many concurrent runs whose clients stay connected, and checks that
// each answer is loom's typed error, in loom's words, and that the
// document the server serves lists every code it gave.
func TestContractEndToEnd(t *testing.T) {
	srv := startServer(t, testserver.Postgres(t), "--keys", keysFile(t), "--provider", "scripted")
	u := srv.url
	if st, _ := call(t, "POST", u+"/v1/threads", keyAcme, map[string]any{"id": "t1"}, nil); st != http.StatusCreated {
		t.Fatalf("create: %d", st)
	}
	for _, tc := range []struct {
		name, method, path, body string
		status                   int
		code, says               string
	}{
		{"number for a string", "POST", "/v1/threads", `{"id":5}`, 400, "invalid_json", "id: expected a string, got a number"},
		{"array for the body", "POST", "/v1/threads", `[]`, 400, "invalid_json", "expected a JSON object, got an array"},
		{"OpenAI's message shape", "POST", "/v1/threads/t1/messages", `{"messages":[{"role":"user","content":"hi"}]}`, 400, "invalid", "messages carry `contents`"},
		{"no contents", "POST", "/v1/threads", `{"messages":[{"role":"user"}]}`, 400, "invalid", "messages carry `contents`"},
		{"lone surrogate", "POST", "/v1/threads/t1/messages", `{"messages":[{"role":"user","contents":[{"type":"text","text":"\ud800"}]}]}`, 400, "invalid_json", "UTF-8"},
		{"raw byte in a title", "PATCH", "/v1/threads/t1", "{\"title\":\"\xff\"}", 400, "invalid_json", "UTF-8"},
		{"raw byte in a checkpoint name", "POST", "/v1/threads/t1/checkpoints", "{\"name\":\"\xc3\"}", 400, "invalid_json", "UTF-8"},
		{"unknown query parameter", "GET", "/v1/threads?lmit=2", "", 400, "invalid", `query parameter "lmit"`},
		{"unknown member", "POST", "/v1/threads/t1/fork", `{"at":"x","colour":"blue"}`, 400, "invalid_json", `unknown member "colour"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, code, msg := rawCall(t, tc.method, u+tc.path, tc.body)
			if st != tc.status || code != tc.code || !strings.Contains(msg, tc.says) {
				t.Errorf("%d %s %q, want %d %s saying %q", st, code, msg, tc.status, tc.code, tc.says)
			}
		})
	}
	var th struct {
		Version int64  `json:"version"`
		Title   string `json:"title"`
	}
	call(t, "GET", u+"/v1/threads/t1", keyAcme, nil, &th)
	if th.Version != 1 || th.Title != "" {
		t.Errorf("bad input changed the thread: %+v", th)
	}

	// Many concurrent runs, some interrupting the others, their clients
	// all connected: each is answered 200, or 409 busy or interrupted;
	// none is told 499 canceled, which is for a client that went away.
	const runs = 50
	for i := range 5 {
		call(t, "POST", u+"/v1/threads", keyAcme, map[string]any{"id": fmt.Sprintf("r%d", i)}, nil)
	}
	var (
		mu    sync.Mutex
		codes = map[string]int{}
		wg    sync.WaitGroup
	)
	for i := range runs {
		wg.Go(func() {
			onBusy := []string{"interrupt", "queue", "interrupt", "reject"}[i%4]
			st, code, _ := rawCall(t, "POST", fmt.Sprintf("%s/v1/threads/r%d/runs", u, i%5), fmt.Sprintf(`{"input":"run %d","on_busy":%q}`, i, onBusy))
			mu.Lock()
			codes[fmt.Sprintf("%d %s", st, code)]++
			mu.Unlock()
		})
	}
	wg.Wait()
	t.Logf("%d runs: %v", runs, codes)
	for k := range codes {
		if !slices.Contains([]string{"200 ", "409 busy", "409 interrupted"}, k) {
			t.Errorf("a connected client's run was answered %s", k)
		}
	}

	// The served document lists the codes.
	var doc struct {
		Components struct {
			Schemas struct {
				ErrorDetail struct {
					Properties struct {
						Code struct {
							Enum []string `json:"enum"`
						} `json:"code"`
					} `json:"properties"`
				} `json:"ErrorDetail"`
			} `json:"schemas"`
		} `json:"components"`
	}
	call(t, "GET", u+"/v1/openapi.json", keyAcme, nil, &doc)
	enum := doc.Components.Schemas.ErrorDetail.Properties.Code.Enum
	for _, code := range []string{"invalid", "invalid_json", "busy", "interrupted", "canceled", "too_many_feeds", "unavailable", "insufficient_storage"} {
		if !slices.Contains(enum, code) {
			t.Errorf("the served document's ErrorDetail.code has no %s: %v", code, enum)
		}
	}
}
