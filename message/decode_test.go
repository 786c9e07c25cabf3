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
	} {
		f.Add([]byte(s))
	}

	f.Fuzz(func(t *testing.T, in []byte) {
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
