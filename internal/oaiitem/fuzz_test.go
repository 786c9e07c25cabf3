package oaiitem_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/loomthreads/loom/internal/oaiitem"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

// FuzzFromItems feeds FromItems any JSON array: it never panics, refuses
// with an error wrapping thread.ErrInvalid, and what it accepts is valid
// messages that read back as as many items.
func FuzzFromItems(f *testing.F) {
	for _, s := range []string{
		`[{"role":"user","content":"hi"}]`,
		`[{"type":"message","role":"assistant","content":[{"type":"output_text","text":"x","annotations":[{"type":"url_citation"}]},{"type":"refusal","refusal":"no"}]}]`,
		`[{"type":"message","role":"user","content":[{"type":"input_image","image_url":"data:image/png;base64,AA=="},{"type":"input_file","file_data":"AAAA","filename":"a.pdf"}]}]`,
		`[{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":[{"type":"input_text","text":"1"}]}]`,
		`[{"type":"reasoning","summary":[{"type":"summary_text","text":"a"}],"encrypted_content":"e"}]`,
		`[{"type":"web_search_call","id":"ws_1","status":"completed"}]`,
		`[{"type":"usage"}]`,
		`[{"id":".x","role":"user","content":"a"}]`,
		`[null, 1, "x", []]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var items []json.RawMessage
		if json.Unmarshal(data, &items) != nil {
			return
		}
		msgs, err := oaiitem.FromItems(items)
		if err != nil {
			if !errors.Is(err, thread.ErrInvalid) {
				t.Fatalf("error %v does not wrap thread.ErrInvalid", err)
			}
			return
		}
		for _, m := range msgs {
			if err := m.Validate(); err != nil {
				t.Fatalf("invalid message %+v: %v", m, err)
			}
		}
		stored, err := json.Marshal(msgs)
		if err != nil {
			t.Fatal(err)
		}
		var back []message.Message
		if err := json.Unmarshal(stored, &back); err != nil {
			t.Fatalf("%s: %v", stored, err)
		}
		got := oaiitem.Items(back)
		if len(got) != len(items) {
			t.Fatalf("%d items read back from %d", len(got), len(items))
		}
		for i, it := range got {
			var obj struct {
				ID   string `json:"id"`
				Type string `json:"type"`
			}
			if err := json.Unmarshal(it.JSON, &obj); err != nil || obj.ID != msgs[i].ID || obj.Type == "" || it.ID != obj.ID {
				t.Fatalf("item %d read back as %s (%v), message id %s", i, it.JSON, err, msgs[i].ID)
			}
		}
	})
}
