package message_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/loomthreads/loom/message"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata from the values in the tests")

// The golden files in testdata hold the canonical encoding: exactly the bytes
// that json.Marshal writes for the value (compact, keys in struct order,
// metadata keys sorted, <, > and & escaped), followed by one newline. A test
// checks that the value encodes to the file, that the file decodes to the
// value, and that decoding and encoding the file gives back the same bytes.
// Run `go test ./message -run Golden -update` to rewrite them after a
// deliberate change of the wire format, and update docs/wire-format.md too.

var goldenContents = []struct {
	file    string
	content message.Content
}{
	{"content_text.json", message.Text{Text: "What is the weather in Paris?"}},
	{"content_function_call.json", message.FunctionCall{CallID: "call_1", Name: "weather", Arguments: `{"city":"Paris"}`}},
	{"content_function_result.json", message.FunctionResult{CallID: "call_1", Result: `{"temp_c":21}`}},
	{"content_function_result_error.json", message.FunctionResult{CallID: "call_2", Result: "timeout after 30s", IsError: true}},
	{"content_data.json", message.Data{MediaType: "image/png", Data: []byte("\x89PNG\r\n\x1a\n"), Name: "pixel.png"}},
	{"content_data_uri.json", message.Data{MediaType: "image/png", URI: "https://example.com/paris.png"}},
	{"content_reasoning.json", message.Reasoning{Text: "The user wants today's weather; call the tool.", Protected: "c2lnbmF0dXJlLXYx"}},
	{"content_usage.json", message.Usage{InputTokens: 1200, OutputTokens: 85, TotalTokens: 1285, CachedInputTokens: 1024, ReasoningTokens: 40}},
	{"content_error.json", message.Error{Code: "rate_limited", Message: "Too many requests; retry in 20s."}},
	{"content_unknown.json", message.Unknown{Raw: []byte(`{"type":"citation","url":"https://example.com/paris","spans":[1,2]}`)}},
}

func goldenMessages() []struct {
	file string
	msg  message.Message
} {
	return []struct {
		file string
		msg  message.Message
	}{
		{"message_minimal.json", message.User("What is the weather in Paris?")},
		{"message_full.json", fullMessage()},
		{"message_unknown.json", message.Message{
			ID:   "msg_01jpbx6c2w8h5t3m9qz4e7r1kd",
			Role: message.RoleAssistant,
			Contents: []message.Content{
				message.Text{Text: "Paris is sunny today."},
				message.Unknown{Raw: []byte(`{"type":"citation","url":"https://example.com/paris","spans":[1,2]}`)},
			},
			CreatedAt: time.Date(2025, 3, 14, 15, 9, 27, 0, time.UTC),
		}},
	}
}

// checkGolden writes encoded to the file when -update is set, and otherwise
// checks that the file holds exactly encoded and a newline. It returns the
// file's contents.
func checkGolden(t *testing.T, file string, encoded []byte) []byte {
	t.Helper()
	path := filepath.Join("testdata", file)
	want := append(bytes.Clone(encoded), '\n')
	if *update {
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to write it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s:\n got %s\nwant %s(run with -update if the change is deliberate)", path, got, want)
	}
	return got
}

func TestGoldenContents(t *testing.T) {
	for _, g := range goldenContents {
		t.Run(g.file, func(t *testing.T) {
			encoded, err := message.MarshalContent(g.content)
			if err != nil {
				t.Fatalf("MarshalContent: %v", err)
			}
			golden := checkGolden(t, g.file, encoded)

			decoded, err := message.UnmarshalContent(bytes.TrimSuffix(golden, []byte("\n")))
			if err != nil {
				t.Fatalf("UnmarshalContent: %v", err)
			}
			if diff := cmp.Diff(g.content, decoded); diff != "" {
				t.Errorf("decoded content mismatch (-want +got):\n%s", diff)
			}
			if got := decoded.Type(); got != g.content.Type() {
				t.Errorf("Type() = %q, want %q", got, g.content.Type())
			}
			again, err := message.MarshalContent(decoded)
			if err != nil {
				t.Fatalf("MarshalContent(decoded): %v", err)
			}
			if !bytes.Equal(append(again, '\n'), golden) {
				t.Errorf("round trip changed the bytes:\n got %s\nwant %s", again, golden)
			}
		})
	}
}

func TestGoldenMessages(t *testing.T) {
	for _, g := range goldenMessages() {
		t.Run(g.file, func(t *testing.T) {
			encoded, err := json.Marshal(g.msg)
			if err != nil {
				t.Fatalf("Marshal: %v", err)
			}
			golden := checkGolden(t, g.file, encoded)

			var decoded message.Message
			if err := json.Unmarshal(golden, &decoded); err != nil {
				t.Fatalf("Unmarshal: %v", err)
			}
			if diff := cmp.Diff(g.msg, decoded); diff != "" {
				t.Errorf("decoded message mismatch (-want +got):\n%s", diff)
			}
			if err := decoded.Validate(); err != nil {
				t.Errorf("Validate() = %v", err)
			}
			again, err := json.Marshal(decoded)
			if err != nil {
				t.Fatalf("Marshal(decoded): %v", err)
			}
			if !bytes.Equal(append(again, '\n'), golden) {
				t.Errorf("round trip changed the bytes:\n got %s\nwant %s", again, golden)
			}
		})
	}
}

// TestGoldenCoverage checks that every variant has a golden file and that
// every file in testdata is checked by a test.
func TestGoldenCoverage(t *testing.T) {
	types := make(map[string]bool)
	checked := make(map[string]bool)
	for _, g := range goldenContents {
		types[g.content.Type()] = true
		checked[g.file] = true
	}
	for _, g := range goldenMessages() {
		checked[g.file] = true
	}
	for _, typ := range []string{"text", "function_call", "function_result", "data", "reasoning", "usage", "error", "citation"} {
		if !types[typ] {
			t.Errorf("no golden file for content type %q", typ)
		}
	}
	files, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if !checked[filepath.Base(f)] {
			t.Errorf("%s is checked by no test", f)
		}
	}
}

// TestWireFormatDoc checks that each example in docs/wire-format.md that is
// marked with <!-- testdata/NAME --> is, once compacted, the golden file NAME,
// and that every golden file is shown there.
func TestWireFormatDoc(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "wire-format.md"))
	if err != nil {
		t.Fatal(err)
	}
	example := regexp.MustCompile("(?s)<!-- testdata/([a-z_]+\\.json) -->\n```json\n(.*?)```")
	shown := make(map[string]bool)
	for _, m := range example.FindAllSubmatch(doc, -1) {
		file := string(m[1])
		shown[file] = true
		golden, err := os.ReadFile(filepath.Join("testdata", file))
		if err != nil {
			t.Errorf("docs/wire-format.md shows %s: %v", file, err)
			continue
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, m[2]); err != nil {
			t.Errorf("docs/wire-format.md, example %s: %v", file, err)
			continue
		}
		if got := compact.String() + "\n"; got != string(golden) {
			t.Errorf("docs/wire-format.md, example %s differs from the golden file:\n got %s\nwant %s", file, got, golden)
		}
	}
	files, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if !shown[filepath.Base(f)] {
			t.Errorf("docs/wire-format.md shows no example of %s", f)
		}
	}
}

func TestMetadataNumbers(t *testing.T) {
	in := `{"role":"user","contents":[],"metadata":{"big":12345678901234567890,"neg":-9223372036854775809,"exp":1e400,"frac":0.10000000000000000001,"list":[18446744073709551616]}}`
	var m message.Message
	if err := json.Unmarshal([]byte(in), &m); err != nil {
		t.Fatal(err)
	}
	if got, want := m.Metadata["big"], json.Number("12345678901234567890"); got != want {
		t.Errorf(`Metadata["big"] = %#v, want %#v`, got, want)
	}
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	for _, num := range []string{"12345678901234567890", "-9223372036854775809", "1e400", "0.10000000000000000001", "18446744073709551616"} {
		if !bytes.Contains(out, []byte(num)) {
			t.Errorf("Marshal lost the number %s: %s", num, out)
		}
	}
}

func TestTimeFormat(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{"2025-03-14T15:09:26.535897932Z", "2025-03-14T15:09:26.535897932Z"},
		{"2025-03-14T15:09:26Z", "2025-03-14T15:09:26Z"},
		{"2025-03-14T15:09:26.500Z", "2025-03-14T15:09:26.5Z"}, // trailing zeros are dropped
		{"2025-03-14T16:09:26.5+01:00", "2025-03-14T16:09:26.5+01:00"},
		{"2025-03-14T10:09:26.5-05:00", "2025-03-14T10:09:26.5-05:00"},
		{"2025-03-14T15:09:26+00:00", "2025-03-14T15:09:26Z"},
		{"2025-03-14T15:09:26,25Z", "2025-03-14T15:09:26.25Z"},
		{"2025-03-14T15:09:26.1234567891Z", "2025-03-14T15:09:26.123456789Z"}, // beyond nanoseconds is dropped
		{"9999-12-31T23:59:59.999999999-23:59", "9999-12-31T23:59:59.999999999-23:59"},
		{"0000-01-01T00:00:00Z", "0000-01-01T00:00:00Z"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			var m message.Message
			if err := json.Unmarshal([]byte(`{"role":"user","contents":[],"created_at":"`+tt.in+`"}`), &m); err != nil {
				t.Fatal(err)
			}
			out, err := json.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			if want := `{"role":"user","contents":[],"created_at":"` + tt.want + `"}`; string(out) != want {
				t.Errorf("Marshal = %s, want %s", out, want)
			}
		})
	}

	t.Run("zero is left out", func(t *testing.T) {
		out, err := json.Marshal(message.User("hi"))
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(out, []byte("created_at")) {
			t.Errorf("Marshal = %s, want no created_at", out)
		}
	})
}

// TestEscaping pins how encoding/json escapes <, > and &: a text is written
// with them escaped, and an unknown content holds its raw JSON in that form
// from the start, so that it equals itself after a round trip.
func TestEscaping(t *testing.T) {
	in := `{"role":"user","contents":[{"type":"text","text":"<b>&</b>"},{"type":"citation","quote":"<b>&</b>\u2028"}]}`
	want := `{"role":"user","contents":[{"type":"text","text":"\u003cb\u003e\u0026\u003c/b\u003e"},{"type":"citation","quote":"\u003cb\u003e\u0026\u003c/b\u003e\u2028"}]}`
	var m message.Message
	if err := json.Unmarshal([]byte(in), &m); err != nil {
		t.Fatal(err)
	}
	if got := m.Text(); got != "<b>&</b>" {
		t.Errorf("Text() = %q, want %q", got, "<b>&</b>")
	}
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != want {
		t.Errorf("Marshal =\n%s\nwant\n%s", out, want)
	}
	raw := m.Contents[1].(message.Unknown).Raw
	c, err := message.MarshalContent(m.Contents[1])
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(c, raw) || !bytes.Contains(out, raw) {
		t.Errorf("Unknown.Raw = %s; MarshalContent wrote %s; the message holds %s", raw, c, out)
	}
	var again message.Message
	if err := json.Unmarshal(out, &again); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(m, again); diff != "" {
		t.Errorf("round trip changed the message (-first +second):\n%s", diff)
	}
}

func TestUnknownIsCompacted(t *testing.T) {
	in := "{ \"type\" : \"citation\",\n\t\"url\": \"https://example.com\", \"spans\": [ 1, 2 ] }"
	c, err := message.UnmarshalContent([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	u, ok := c.(message.Unknown)
	if !ok {
		t.Fatalf("UnmarshalContent = %T, want message.Unknown", c)
	}
	if want := `{"type":"citation","url":"https://example.com","spans":[1,2]}`; string(u.Raw) != want {
		t.Errorf("Raw = %s, want %s", u.Raw, want)
	}
	if u.Type() != "citation" {
		t.Errorf("Type() = %q, want citation", u.Type())
	}
	if got := (message.Unknown{Raw: []byte(`{"url":"x"}`)}).Type(); got != "" {
		t.Errorf("Type() without a type member = %q, want empty", got)
	}
}

func TestEmptyAndNull(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"contents null", `{"role":"user","contents":null}`, `{"role":"user","contents":[]}`},
		{"contents missing", `{"role":"user"}`, `{"role":"user","contents":[]}`},
		{"empty metadata", `{"role":"user","contents":[],"metadata":{}}`, `{"role":"user","contents":[],"metadata":{}}`},
		{"null metadata", `{"role":"user","contents":[],"metadata":null}`, `{"role":"user","contents":[]}`},
		{"empty data", `{"role":"user","contents":[{"type":"data","data":""}]}`, `{"role":"user","contents":[{"type":"data","data":""}]}`},
		{"empty text", `{"role":"user","contents":[{"type":"text"}]}`, `{"role":"user","contents":[{"type":"text","text":""}]}`},
		{"empty error", `{"role":"user","contents":[{"type":"error"}]}`, `{"role":"user","contents":[{"type":"error","message":""}]}`},
		{"zero usage", `{"role":"user","contents":[{"type":"usage","input_tokens":0}]}`, `{"role":"user","contents":[{"type":"usage"}]}`},
		{"whitespace", " \n{ \"role\" : \"user\" }\n ", `{"role":"user","contents":[]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var m message.Message
			if err := json.Unmarshal([]byte(tt.in), &m); err != nil {
				t.Fatal(err)
			}
			out, err := json.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			if string(out) != tt.want {
				t.Errorf("Marshal = %s, want %s", out, tt.want)
			}
		})
	}
	if out, err := json.Marshal(message.Message{}); err != nil || string(out) != `{"role":"","contents":[]}` {
		t.Errorf("Marshal(Message{}) = %s, %v; want {\"role\":\"\",\"contents\":[]}", out, err)
	}
}

func TestUnmarshalErrors(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string // a substring of the error, or "" for any error
	}{
		{"empty", ``, ""},
		{"truncated", `{"role":"user","contents":[`, ""},
		{"not JSON", `role: user`, ""},
		{"trailing comma", `{"role":"user",}`, ""},
		{"array", `[]`, ""},
		{"string", `"user"`, ""},
		{"number", `42`, ""},
		{"role not a string", `{"role":1,"contents":[]}`, ""},
		{"id not a string", `{"id":7,"role":"user","contents":[]}`, ""},
		{"contents not an array", `{"role":"user","contents":{"type":"text"}}`, ""},
		{"metadata not an object", `{"role":"user","contents":[],"metadata":[1]}`, ""},
		{"created_at not a time", `{"role":"user","contents":[],"created_at":"yesterday"}`, ""},
		{"created_at offset hour 24", `{"role":"user","contents":[],"created_at":"2025-03-14T15:09:26+24:00"}`, "created_at:"},
		{"created_at offset hour 25", `{"role":"user","contents":[],"created_at":"2025-03-14T15:09:26-25:00"}`, ""},
		{"created_at lowercase t", `{"role":"user","contents":[],"created_at":"2025-03-14t15:09:26Z"}`, ""},
		{"created_at offset without colon", `{"role":"user","contents":[],"created_at":"2025-03-14T15:09:26+0100"}`, ""},
		{"created_at a number", `{"role":"user","contents":[],"created_at":1700000000}`, ""},
		{"content a number", `{"role":"user","contents":[1]}`, "contents[0]: content:"},
		{"content a string", `{"role":"user","contents":["hi"]}`, "contents[0]: content:"},
		{"content an array", `{"role":"user","contents":[["text"]]}`, "contents[0]: content:"},
		{"content null", `{"role":"user","contents":[{"type":"text","text":""},null]}`, "contents[1]: content: missing type"},
		{"content without type", `{"role":"user","contents":[{"text":"hi"}]}`, "contents[0]: content: missing type"},
		{"content with empty type", `{"role":"user","contents":[{"type":"","text":"hi"}]}`, "missing type"},
		{"content type a number", `{"role":"user","contents":[{"type":1}]}`, "contents[0]: content:"},
		{"content type null", `{"role":"user","contents":[{"type":null}]}`, "missing type"},
		{"text a number", `{"role":"user","contents":[{"type":"text","text":5}]}`, "contents[0]: text:"},
		{"call_id a number", `{"role":"user","contents":[{"type":"function_call","call_id":1,"name":"f"}]}`, "function_call:"},
		{"arguments an object", `{"role":"user","contents":[{"type":"function_call","call_id":"c","name":"f","arguments":{"city":"Paris"}}]}`, "function_call:"},
		{"is_error a string", `{"role":"user","contents":[{"type":"function_result","call_id":"c","is_error":"yes"}]}`, "function_result:"},
		{"data not base64", `{"role":"user","contents":[{"type":"data","data":"!!!"}]}`, "data:"},
		{"data a number", `{"role":"user","contents":[{"type":"data","data":5}]}`, "data:"},
		{"reasoning text a bool", `{"role":"user","contents":[{"type":"reasoning","text":true}]}`, "reasoning:"},
		{"tokens a string", `{"role":"user","contents":[{"type":"usage","input_tokens":"5"}]}`, "usage:"},
		{"tokens a fraction", `{"role":"user","contents":[{"type":"usage","input_tokens":1.5}]}`, "usage:"},
		{"tokens too big", `{"role":"user","contents":[{"type":"usage","input_tokens":12345678901234567890}]}`, "usage:"},
		{"error message a number", `{"role":"user","contents":[{"type":"error","message":404}]}`, "error:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var m message.Message
			err := json.Unmarshal([]byte(tt.in), &m)
			if err == nil {
				t.Fatalf("Unmarshal(%s) = nil error, want one; decoded %#v", tt.in, m)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Unmarshal(%s) = %q, want it to contain %q", tt.in, err, tt.want)
			}
		})
	}

	t.Run("data after the object", func(t *testing.T) {
		for _, in := range []string{`{"role":"user"} {}`, `{"role":"user"}}`, `{"role":"user"}]`, `{"role":"user"}x`} {
			var m message.Message
			if err := m.UnmarshalJSON([]byte(in)); err == nil {
				t.Errorf("UnmarshalJSON(%s) = nil error, want one", in)
			}
		}
	})
	t.Run("failed decode leaves the message", func(t *testing.T) {
		m := message.User("kept")
		if err := m.UnmarshalJSON([]byte(`{"role":"user","contents":[{"type":"text","text":1}]}`)); err == nil {
			t.Fatal("UnmarshalJSON = nil error, want one")
		}
		if diff := cmp.Diff(message.User("kept"), m); diff != "" {
			t.Errorf("failed UnmarshalJSON changed the message (-want +got):\n%s", diff)
		}
	})
}

func TestMarshalErrors(t *testing.T) {
	tests := []struct {
		name    string
		content message.Content
		want    string
	}{
		{"nil", nil, "nil content"},
		{"pointer", &message.Text{Text: "hi"}, "content type *message.Text"},
		{"unknown nil", message.Unknown{}, "content:"},
		{"unknown not JSON", message.Unknown{Raw: []byte(`{"type":`)}, "content:"},
		{"unknown without type", message.Unknown{Raw: []byte(`{"url":"x"}`)}, "missing type"},
		{"unknown not an object", message.Unknown{Raw: []byte(`"citation"`)}, "content:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if b, err := message.MarshalContent(tt.content); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("MarshalContent = %s, %v; want an error containing %q", b, err, tt.want)
			}
			m := message.New(message.RoleUser, message.Text{Text: "ok"}, tt.content)
			if b, err := json.Marshal(m); err == nil || !strings.Contains(err.Error(), "contents[1]") {
				t.Errorf("Marshal = %s, %v; want an error naming contents[1]", b, err)
			}
		})
	}
}
