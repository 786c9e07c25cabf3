package httpapi

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/loomthreads/loom/message"
)

// stdMessages is messageList read by decodeMessagesStd alone, and
// stdAppend an append's body read by encoding/json alone: the references
// of the fast paths.
type (
	stdMessages []message.Message
	stdAppend   struct {
		Messages stdMessages `json:"messages"`
	}
)

func (l *stdMessages) UnmarshalJSON(b []byte) error {
	msgs, err := decodeMessagesStd(b, "messages")
	*l = msgs
	return err
}

// appendBodies are bodies of an append, of every shape the fast path
// reads and many it leaves to encoding/json.
var appendBodies = []string{
	`{"messages":[{"role":"user","contents":[{"type":"text","text":"hi"}]}]}`,
	" \n{ \"messages\" :\t[ {\"role\":\"user\",\"contents\":[{\"type\":\"text\",\"text\":\"a\"}]} , {\"role\":\"assistant\",\"contents\":[{\"type\":\"text\",\"text\":\"b\"}]} ] } \r\n",
	`{"messages":[{"id":"m1","role":"user","author_name":"<b>","contents":[{"type":"text","text":"x\"}]{["}],"metadata":{"a":[1,{"b":"]"}]}}]}`,
	`{"messages":[{"role":"tool","contents":[{"type":"function_result","call_id":"c9","result":"x"}]}]}`,
	`{"messages":[{"role":"user","contents":[{"type":"citation","url":"u"}],"metadata":{"n":1e400}}]}`,
	`{"messages":[{"role":"USER","contents":[{"type":"data","data":"!!"}]}]}`,
	`{"messages":[{"role":"user","contents":[{"type":"text","text":"hi"}],"created_at":"2026-01-02T03:04:05Z"}]}`,
	`{"messages":[{"role":"user","contents":[{"type":"someday","x":1}]}]}`,
	`{"messages":[{"role":"user","contents":[]}]}`,
	`{"messages":[{"role":"user"}]}`,
	`{"messages":[{"role":"user","content":"hi"}]}`,
	`{"messages":[{"role":"user","contents":null}]}`,
	`{"messages":[]}`, `{"messages":null}`, `{}`, `{"messages":{}}`, `{"messages":"hi"}`, `{"messages":[1]}`,
	`{"messages":[null]}`, `{"messages":[[]]}`,
	`{"Messages":[{"role":"user","contents":[{"type":"text","text":"hi"}]}]}`,
	`{"messages":[{"role":"user","contents":[{"type":"text","text":"a"}]}],"messages":[{"role":"user","contents":[{"type":"text","text":"b"}]}]}`,
	`{"messages":[{"role":"user","contents":[{"type":"text","text":"hi"}]}],"x":1}`,
	`{"messages":[{"role":"user","contents":[{"type":"text","text":"hi"}]} {"role":"user","contents":[{"type":"text","text":"hi"}]}]}`,
	`{"messages":[{"role":"user","contents":[{"type":"text","text":"hi"}]},]}`,
	`{"messages":[{"role":"user","contents":[{"type":"text","text":"hi"}]}]`,
	`{"messages":[{"role":"user","contents":[{"type":"text","text":"hi"}]}]}}`,
	`{"messages":[{"role":"user","contents":[{"type":"text","text":"hi"}]}]} {}`,
	`{"messages":[{"role":"user","contents":[{"type":"text","text":"hi"}]]}`,
	`{"messages":[{"role":"user","contents":[{"type":"text","text":"hi}]}]}`,
	`{"messages":[{"role":"user","contents":[{"type":"text","text":"hi"}]}}]}`,
	`{"messages":[{"role":"user","contents":[{"type":"text","text":"\u00e9\ud83d\ude00"}]}]}`,
	`{"messages":[{"role":"user","contents":[{"type":"text","text":"a"}],"role":"user"}]}`,
	`{"messages" [{"role":"user","contents":[{"type":"text","text":"hi"}]}]}`,
	`{"messages":[{"role":"user","contents":[{"type":"text","text":"hi"}]}],}`,
	`{"messages":[{"role":"user","contents":[{"type":"text","text":"hi"}]}] ,"x":}`,
	`{"mess\u0061ges":[{"role":"user","contents":[{"type":"text","text":"hi"}]}]}`,
	`{"messages":[{"role":"user","contents":[{"type":"text","text":"hi"}]}`,
	`{"messages":[`, `{"messages":`, `{"messages"`, `{`, `[`, `null`, ``, `"hi"`,
}

// TestDecodeAppendFast checks that an append's body reads as encoding/json
// reads it, fast path or not: the same messages, or the same error.
func TestDecodeAppendFast(t *testing.T) {
	for _, body := range appendBodies {
		checkDecodeAppend(t, body)
	}
}

func FuzzDecodeAppend(f *testing.F) {
	for _, body := range appendBodies {
		f.Add(body)
	}
	f.Fuzz(func(t *testing.T, body string) { checkDecodeAppend(t, body) })
}

func checkDecodeAppend(t *testing.T, body string) {
	t.Helper()
	var fast appendRequest
	fastErr := decodeBytes([]byte(body), &fast, false)
	var std stdAppend
	stdErr := decodeBytes([]byte(body), &std, false)
	if (fastErr == nil) != (stdErr == nil) || (fastErr != nil && fastErr.Error() != stdErr.Error()) {
		t.Fatalf("%q: error %v, encoding/json's %v", body, fastErr, stdErr)
	}
	if diff := cmp.Diff([]message.Message(std.Messages), []message.Message(fast.Messages)); diff != "" {
		t.Fatalf("%q (-encoding/json +fast):\n%s", body, diff)
	}
	if (std.Messages == nil) != (fast.Messages == nil) {
		t.Fatalf("%q: nil %v, encoding/json's %v", body, fast.Messages == nil, std.Messages == nil)
	}
	// decodeMessages alone, as runs read an input and creations their
	// messages.
	if i := len(`{"messages":`); len(body) > i && body[:i] == `{"messages":` {
		raw := []byte(body[i : len(body)-1])
		msgs, err := decodeMessages(raw, "messages")
		stdMsgs, stdErr := decodeMessagesStd(raw, "messages")
		if (err == nil) != (stdErr == nil) || (err != nil && err.Error() != stdErr.Error()) {
			t.Fatalf("%q: error %v, encoding/json's %v", raw, err, stdErr)
		}
		if diff := cmp.Diff(stdMsgs, msgs); diff != "" || (msgs == nil) != (stdMsgs == nil) {
			t.Fatalf("%q (-encoding/json +fast):\n%s", raw, diff)
		}
	}
}
