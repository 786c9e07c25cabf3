package openaiapi_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/loomthreads/loom/agent/scripted"
	"github.com/loomthreads/loom/httpapi"
	"github.com/loomthreads/loom/openaiapi"
	"github.com/loomthreads/loom/thread"
)

// FuzzResponseRequest sends POST /responses bodies through the chain loom
// serve mounts: whatever the body, nothing panics, an accepted request is
// answered with a response object (or its stream), and every refusal is a
// 4xx in OpenAI's error shape — never a 500.
func FuzzResponseRequest(f *testing.F) {
	for _, seed := range []string{
		`{"model":"m","input":"hi"}`,
		`{"model":"m","input":"hi","stream":true}`,
		`{"model":"loom","include":[],"input":[{"role":"user","content":"Hello"}],"instructions":"be brief","tools":[{"type":"function","name":"add","description":"adds","parameters":{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"],"additionalProperties":false},"strict":true}],"stream":false}`,
		`{"model":"m","input":[{"type":"function_call","call_id":"c1","name":"f","arguments":"{}","id":"fc_1","status":"completed"},{"type":"function_call_output","call_id":"c1","output":"ok","status":"completed"}]}`,
		`{"model":"m","input":"call add {\"a\":1}","tools":[{"type":"function","name":"add"}],"tool_choice":{"type":"function","name":"add"}}`,
		`{"model":"m","input":"x","tools":[{"type":"web_search"}]}`,
		`{"model":"m","input":"x","background":true}`,
		`{"model":"m","input":"x","conversation":"conv_x","previous_response_id":"resp_x"}`,
		`{"model":"m","input":"x","conversation":{"id":"conv_nope"}}`,
		`{"model":"m","input":"x","previous_response_id":"resp_0123456789abcdefghjkmnpqrs_th_x"}`,
		`{"model":"m","input":[{"type":"item_reference","id":"msg_1"}]}`,
		`{"model":"m","input":"x","text":{"format":{"type":"json_schema","name":"s","schema":{"type":"object"},"strict":true},"verbosity":"low"}}`,
		`{"model":"m","input":"x","reasoning":{"effort":"low","summary":"auto"},"truncation":"auto","metadata":{"k":"v"},"store":false,"temperature":0.5,"top_p":0.9,"max_output_tokens":100}`,
		`{"model":"m","input":"x","unknown":1}`,
		`{"input":[{"role":"user","content":[{"type":"input_image","image_url":"data:image/png;base64,AAAA"}]}]}`,
		`[]`, `{`, ``, `{"input":null}`, `{"input":7}`, `{"model":"m","input":"x","stream_options":{"include_obfuscation":false}}`,
	} {
		f.Add(seed)
	}
	db := thread.New(thread.NewMemoryStore(), nil)
	quiet := slog.New(slog.DiscardHandler)
	model := scripted.Echo()
	api := httpapi.New(httpapi.Options{DB: db, Logger: quiet, MaxBodyBytes: 1 << 20})
	h := openaiapi.Errors(api.Protect(openaiapi.New(openaiapi.Options{DB: db, Chat: model, Logger: quiet})))
	f.Fuzz(func(t *testing.T, body string) {
		req := httptest.NewRequest("POST", openaiapi.Prefix+"/responses", strings.NewReader(body))
		req.RemoteAddr = "127.0.0.1:1234"
		req.Header.Set("Authorization", "Bearer loom")
		req.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		switch {
		case w.Code == http.StatusOK && strings.HasPrefix(w.Header().Get("Content-Type"), "text/event-stream"):
			if !bytes.HasPrefix(w.Body.Bytes(), []byte("event: response.created\n")) {
				t.Fatalf("stream %q", w.Body.String())
			}
		case w.Code == http.StatusOK:
			var obj struct {
				ID     string `json:"id"`
				Object string `json:"object"`
				Status string `json:"status"`
			}
			if err := json.Unmarshal(w.Body.Bytes(), &obj); err != nil || obj.Object != "response" || !strings.HasPrefix(obj.ID, "resp_") || obj.Status == "" {
				t.Fatalf("200 %s", w.Body.String())
			}
		case w.Code >= 400 && w.Code < 500:
			var e struct {
				Error *struct {
					Message string  `json:"message"`
					Type    string  `json:"type"`
					Param   *string `json:"param"`
					Code    *string `json:"code"`
				} `json:"error"`
			}
			if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || e.Error == nil || e.Error.Message == "" || e.Error.Type != "invalid_request_error" {
				t.Fatalf("%d %s", w.Code, w.Body.String())
			}
		default:
			t.Fatalf("%d %s", w.Code, w.Body.String())
		}
	})
}
