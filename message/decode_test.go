package message

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// FuzzDecoder checks that whatever decoder reads, encoding/json reads the
// same way: decoder may give up on an input, but never disagree.
func FuzzDecoder(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	if err != nil {
		f.Fatal(err)
	}
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{
		`{"role":"user","contents":[{"type":"text","text":"<b>&\u2028 \"q\" \\ \/ \b\f\n\r\t \u00e9 é 😀"}]}`,
		`{"role":"user","contents":[{"type":"text","text":"\ud83d\ude00 \ud83d \ud83dx \udc00\ud800 \ud800\u0041 \uD83D\uDE00"}]}`,
		"{\"role\":\"user\",\"contents\":[{\"type\":\"text\",\"text\":\"\xff\xc3\"}]}",
		"{\"role\":\"user\",\"contents\":[{\"type\":\"text\",\"text\":\"a\x01\"}]}",
		`{"role":"user","contents":[{"type":"text","text":"\x"}]}`,
		`{"role":"user","contents":[{"type":"text","text":"\u12"}]}`,
		` { "id" : "m" , "role" : "tool" , "author_name" : null , "contents" : [ { "type" : "function_result" , "call_id" : "c" , "is_error" : true } ] } `,
		`{"role":"user","contents":[{"text":"hi","type":"text"},{"type":"TEXT"},{"type":"text","TEXT":"x"}]}`,
		`{"Role":"user","contents":[]}`,
		`{"role":"user","role":"tool"}`,
		`{"role":"user","contents":[{"type":"text","text":"a","text":"b"}]}`,
		`{"role":"user","contents":[{"type":"text","type":"x"}]}`,
		`{"role":"user","contents":[{"type":"text","name":1}]}`,
		`{"role":"user","contents":[{"type":"\u0074ext","text":"x"}]}`,
		`{"role":"user","contents":[{"type":"function_call","call_id":"c","name":"f","arguments":"{\"a\":[1,2]}"}]}`,
		`{"role":"user","contents":[{"type":"data","media_type":"image/png","data":"iVBORw0KGgo=","name":"p"},{"type":"data","data":"iVBO\nRw0KGgo="},{"type":"data","data":null}]}`,
		`{"role":"user","contents":[{"type":"usage","input_tokens":-0,"output_tokens":123456789012345678,"total_tokens":1234567890123456789,"cached_input_tokens":1e2,"reasoning_tokens":1.0}]}`,
		`{"role":"user","contents":[{"type":"usage","input_tokens":01}]}`,
		`{"role":"user","contents":[{"type":"reasoning","text":"t","protected":"p"},{"type":"error","code":"c","message":"m"}]}`,
		`{"role":"user","contents":[{"type":"citation","a":[1,{"b":"<>"}],"c":-1.5e-3}],"x":1}`,
		`{"role":"user","contents":[{"type":"text","text":"x"},null,1,"s",[],{}]}`,
		`{"role":"user","contents":[],"created_at":"2025-03-14T15:09:26.5Z"}`,
		`{"role":"user","contents":[],"created_at":"2025-03-14T15:09:26+00:00"}`,
		`{"role":"user","contents":[],"created_at":"2025-03-14T15:09:26-23:59"}`,
		`{"role":"user","contents":[],"created_at":"2025-03-14T15:09:26+24:00"}`,
		`{"role":"user","contents":[],"created_at":null}`,
		`{"role":"user","contents":[],"metadata":{"a":1,"a":{"b":[1,"x",true,false,null,{}],"c":[]},"\u00e9":-0.5E+2}}`,
		`{"role":"user","contents":[],"metadata":{"a":1},"metadata":{"b":2}}`,
		`{"role":"user","contents":[],"metadata":{"a":[[[[[[[[[[1]]]]]]]]]]}}`,
		`{"role":"user","contents":[],"metadata":{"a":01}}`,
		`{"role":"user","contents":null,"metadata":null}`,
		`{"role":"user"}x`,
		`{"role":"user"} {}`,
		`{}`,
		`null`,
		`{"type":"text","text":"a content alone"}`,
		// Negative integers, which the decoder reads on its fast path.
		`{"type":"usage","input_tokens":-1,"output_tokens":-42,"total_tokens":-123456789012345678,"cached_input_tokens":-0,"reasoning_tokens":7}`,
		// Bytes that are not UTF-8 after an escape.
		"{\"role\":\"user\",\"contents\":[{\"type\":\"text\",\"text\":\"\\n\xff\"}]}",
		"{\"role\":\"user\",\"metadata\":{\"k\":\"\\u00e9\xc3\"}}",
		"{\"type\":\"reasoning\",\"text\":\"\\\"\xed\xa0\x80\"}",
	} {
		f.Add([]byte(s))
	}
	// Escapes JSON refuses, in each place a string goes.
	for _, s := range badEscapes {
		f.Add([]byte(`{"role":"user","contents":[{"type":"text","text":` + s + `}]}`))
		f.Add([]byte(`{"role":"user","metadata":{` + s + `:` + s + `}}`))
		f.Add([]byte(`{"role":"user","contents":[{"type":"x","v":` + s + `}]}`))
		f.Add([]byte(`{"type":"text","text":` + s + `}`))
	}
	// Input that ends in an escape cut short.
	for _, tail := range []string{`\`, `\u`, `\u0`, `\u00e`, `\ud83d\u`, `\ud83d\ude0`} {
		f.Add([]byte(`{"role":"user","contents":[{"type":"text","text":"` + tail))
		f.Add([]byte(`{"role":"user","metadata":{"` + tail))
		f.Add([]byte(`{"type":"text","text":"` + tail))
	}

	f.Fuzz(func(t *testing.T, in []byte) {
		in = in[:len(in):len(in)] // a read past the end panics
		if got, ok := decodeMessage(in); ok {
			var want Message
			if err := want.unmarshalJSONStd(in); err != nil {
				t.Fatalf("decoder read %q, which encoding/json refuses: %v", in, err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("decoder read %q otherwise (-encoding/json +decoder):\n%s", in, diff)
			}
		}
		if got, ok := decodeContent(in); ok {
			want, err := unmarshalContentStd(in)
			if err != nil {
				t.Fatalf("decoder read the content %q, which encoding/json refuses: %v", in, err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("decoder read the content %q otherwise (-encoding/json +decoder):\n%s", in, diff)
			}
		}
	})
}

// TestDecoderReadsWhatMarshalWrites checks that decoder gives up on none of
// what MarshalJSON writes, so that stores read it on the fast path.
func TestDecoderReadsWhatMarshalWrites(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		switch name := filepath.Base(file); {
		case strings.HasPrefix(name, "message_"):
			if _, ok := decodeMessage(b); !ok {
				t.Errorf("decoder gives up on %s", name)
			}
		case name != "content_unknown.json": // left to encoding/json
			if _, ok := decodeContent(b); !ok {
				t.Errorf("decoder gives up on %s", name)
			}
		}
	}

	m := User("<b>&</b> \u2028\u2029 \"quoted\" \\ \n\t\x01 é 😀 \xff")
	m.Contents = append(m.Contents, Data{Data: []byte{}}, FunctionResult{CallID: "c", Result: "{\"a\":1}", IsError: true})
	m.Metadata = map[string]any{"n": json.Number("1e400"), "s": "é\n", "l": []any{}, "o": map[string]any{}}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	got, ok := decodeMessage(b)
	if !ok {
		t.Fatalf("decoder gives up on %s", b)
	}
	var want Message
	if err := want.unmarshalJSONStd(b); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("decoder read %s otherwise (-encoding/json +decoder):\n%s", b, diff)
	}
}

// exact returns s as bytes with no capacity past its length, so that a
// read past the end of the input panics rather than reading spare capacity.
func exact(s string) []byte {
	b := []byte(s)
	return b[:len(b):len(b)]
}

// agrees checks that the decoder reads in as a message and as a content
// the way encoding/json does, giving up where encoding/json refuses it, and
// that Message.UnmarshalJSON and UnmarshalContent say what encoding/json
// says. It returns whether encoding/json reads in as a message.
func agrees(t *testing.T, in string) bool {
	t.Helper()
	var want Message
	werr := want.unmarshalJSONStd(exact(in))
	got, ok := decodeMessage(exact(in))
	switch {
	case ok && werr != nil:
		t.Errorf("decoder read %q, which encoding/json refuses: %v", in, werr)
	case ok:
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("decoder read %q otherwise (-encoding/json +decoder):\n%s", in, diff)
		}
	}
	var m Message
	if err := m.UnmarshalJSON(exact(in)); (err == nil) != (werr == nil) {
		t.Errorf("UnmarshalJSON(%q): %v, encoding/json: %v", in, err, werr)
	}
	wantC, cerr := unmarshalContentStd(exact(in))
	gotC, ok := decodeContent(exact(in))
	switch {
	case ok && cerr != nil:
		t.Errorf("decoder read the content %q, which encoding/json refuses: %v", in, cerr)
	case ok:
		if diff := cmp.Diff(wantC, gotC); diff != "" {
			t.Errorf("decoder read the content %q otherwise (-encoding/json +decoder):\n%s", in, diff)
		}
	}
	if _, err := UnmarshalContent(exact(in)); (err == nil) != (cerr == nil) {
		t.Errorf("UnmarshalContent(%q): %v, encoding/json: %v", in, err, cerr)
	}
	return werr == nil
}

// TestDecoderNegativeIntegers checks that the decoder reads the integers of
// usage, negative ones too, as encoding/json does, on its fast path.
func TestDecoderNegativeIntegers(t *testing.T) {
	for _, n := range []string{"-1", "-42", "-0", "-123456789012345678", "7", "null"} {
		for _, field := range []string{"input_tokens", "output_tokens", "total_tokens", "cached_input_tokens", "reasoning_tokens"} {
			in := `{"type":"usage","` + field + `":` + n + `}`
			c, ok := decodeContent(exact(in))
			if !ok {
				t.Errorf("decoder gives up on %s", in)
				continue
			}
			want, err := unmarshalContentStd(exact(in))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, c); diff != "" {
				t.Errorf("decoder read %s otherwise (-encoding/json +decoder):\n%s", in, diff)
			}
		}
	}
	d := decoder{data: exact("-9")}
	if n, ok := d.int(); !ok || n != -9 {
		t.Errorf("int() of -9: %d, %v", n, ok)
	}
}

// badEscapes are strings (with their quotes) that JSON refuses for an
// escape: \u without four hex digits, escapes JSON does not have, and a
// backslash at the end.
var badEscapes = []string{
	`"\uZZZZ"`, `"\u12G4"`, `"\u-123"`, `"\u 123"`, `"\u123"`, `"\u12"`, `"\u"`,
	`"\ud83d\uZZZZ"`, `"a\x41"`, `"\'"`, `"\U00e9"`, `"\a"`, `"\0"`, `"\v"`, `"\\\"`, `"\`,
}

// TestDecoderRefusesBadEscapes checks that each reader of strings in
// decoder refuses what encoding/json refuses, and that a message or a
// content holding one anywhere is refused as encoding/json refuses it.
func TestDecoderRefusesBadEscapes(t *testing.T) {
	for _, s := range badEscapes {
		if json.Valid([]byte(s)) {
			t.Fatalf("encoding/json takes %s", s)
		}
		d := decoder{data: exact(s)}
		if b, ok := d.str(); ok {
			t.Errorf("str() reads %s as %q", s, b)
		}
		d = decoder{data: exact(s)}
		if d.skipString() {
			t.Errorf("skipString() reads %s", s)
		}
		d = decoder{data: exact(s)}
		if d.skip(0) && d.off == len(s) {
			t.Errorf("skip() reads %s", s)
		}
		d = decoder{data: exact(`[` + s + `]`)}
		if d.skip(0) {
			t.Errorf("skip() reads [%s]", s)
		}
		for _, in := range []string{
			`{"role":"user","contents":[{"type":"text","text":` + s + `}]}`,
			`{"role":"user","author_name":` + s + `}`,
			`{"role":"user","metadata":{"k":` + s + `}}`,
			`{"role":"user","metadata":{` + s + `:1}}`,
			`{"role":"user","contents":[{"type":"x","v":` + s + `}]}`,
			`{"role":"user",` + s + `:1}`,
			`{"type":"text","text":` + s + `}`,
			`{"type":"function_call","name":"f","arguments":` + s + `}`,
		} {
			if agrees(t, in) {
				t.Errorf("encoding/json reads %s", in)
			}
		}
	}
	// The good escapes, each at the end of the string and of the input.
	for _, s := range []string{`"\""`, `"\\"`, `"\/"`, `"\b\f\n\r\t"`, `"\u00e9"`, `"\uD83D\uDE00"`, `"\ud83d"`, `"\ud83d\u0041"`} {
		d := decoder{data: exact(s)}
		var want string
		if err := json.Unmarshal([]byte(s), &want); err != nil {
			t.Fatal(err)
		}
		if b, ok := d.str(); !ok || string(b) != want {
			t.Errorf("str() reads %s as %q, %v; want %q", s, b, ok, want)
		}
		d = decoder{data: exact(s)}
		if !d.skipString() || d.off != len(s) {
			t.Errorf("skipString() does not read %s", s)
		}
		agrees(t, `{"type":"text","text":`+s+`}`)
	}
}

// TestDecoderInvalidUTF8AfterEscape checks that the decoder gives up on
// bytes that are not UTF-8 in a string that holds an escape before them,
// as it does where none does, rather than keep them: encoding/json reads
// them as U+FFFD. Control characters after an escape are refused, as
// encoding/json refuses them.
func TestDecoderInvalidUTF8AfterEscape(t *testing.T) {
	for _, s := range []string{"\"\\n\x01\"", "\"\\u00e9\t\""} {
		d := decoder{data: exact(s)}
		if b, ok := d.str(); ok {
			t.Errorf("str() reads %q as %q", s, b)
		}
		if agrees(t, `{"type":"text","text":`+s+`}`) {
			t.Errorf("encoding/json reads %q", s)
		}
	}
	for _, s := range []string{"\"\\n\xff\"", "\"\\u00e9\xc3\"", "\"\\\"\xed\xa0\x80\"", "\"\\t ok \xf0\x9f\x98\"", "\"\xff\\n\""} {
		d := decoder{data: exact(s)}
		if b, ok := d.str(); ok {
			t.Errorf("str() reads %q as %q", s, b)
		}
		agrees(t, `{"role":"user","contents":[{"type":"text","text":`+s+`}]}`)
		agrees(t, `{"role":"user","metadata":{"k":`+s+`}}`)
		agrees(t, `{"type":"reasoning","text":`+s+`}`)
	}
}

// TestDecoderEscapeAtEnd checks that input that ends in an escape cut
// short, with no capacity past its end, is refused, not a panic.
func TestDecoderEscapeAtEnd(t *testing.T) {
	for _, tail := range []string{`\`, `\u`, `\u0`, `\u00`, `\u00e`, `\ud83d\`, `\ud83d\u`, `\ud83d\ude0`} {
		for _, in := range []string{
			`"` + tail,
			`"ok` + tail,
			`{"role":"user","contents":[{"type":"text","text":"` + tail,
			`{"role":"user","metadata":{"k":"` + tail,
			`{"role":"user","metadata":{"` + tail,
			`{"role":"user","contents":[{"type":"x","v":"` + tail,
			`{"role":"user","created_at":"` + tail,
			`{"role` + tail,
			`{"type":"text","text":"` + tail,
		} {
			if agrees(t, in) {
				t.Errorf("encoding/json reads %s", in)
			}
			for _, read := range []func(d *decoder) bool{
				func(d *decoder) bool { _, ok := d.str(); return ok },
				func(d *decoder) bool { return d.skipString() },
				func(d *decoder) bool { return d.skip(0) },
				func(d *decoder) bool { _, ok := d.any(0); return ok },
			} {
				if read(&decoder{data: exact(in)}) {
					t.Errorf("a reader takes %s", in)
				}
			}
		}
	}
	for n := range 4 {
		if r := hex4(exact("0123"[:n])); r != -1 {
			t.Errorf("hex4 of %d digits: %d", n, r)
		}
	}
}
