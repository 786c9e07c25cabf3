package message_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/loomthreads/loom/message"
)

// FuzzMessageJSON checks that reading any input never panics, and that a
// message read from JSON is written in a canonical form: writing it succeeds,
// and reading and writing that again gives the same bytes and an equal
// message.
func FuzzMessageJSON(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	if err != nil {
		f.Fatal(err)
	}
	if len(files) == 0 {
		f.Fatal("no golden files in testdata to seed the corpus")
	}
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{
		`{"role":"user","contents":[{"type":"text","text":"<b>&\u2028"}]}`,
		`{"role":"user","contents":[{"type":"x","a":"<\u00e9>","a":1e400}],"metadata":{"k":-0.0e-0}}`,
		`{"role":"user","contents":null,"created_at":"2025-03-14T16:09:26.5+01:00","metadata":{}}`,
		`{"role":"user","contents":[],"created_at":"9999-12-31T23:59:59.999999999-23:59"}`,
		`{"role":"user","contents":[{"type":"data","data":""}]}`,
		`{"role":"user","contents":[{"type":"text"}]}`,
		`{"role":"user","contents":[{"TYPE":"text","Text":"hi"}]}`,
		`{"role":"user","contents":[null]}`,
		`{"role":"user"} {}`,
		`null`,
	} {
		f.Add([]byte(s))
	}

	f.Fuzz(func(t *testing.T, in []byte) {
		var m message.Message
		err := json.Unmarshal(in, &m)

		// Calling UnmarshalJSON directly agrees with json.Unmarshal.
		var direct message.Message
		if derr := direct.UnmarshalJSON(in); (derr == nil) != (err == nil) {
			t.Fatalf("json.Unmarshal error %v, but UnmarshalJSON error %v", err, derr)
		} else if err == nil {
			if diff := cmp.Diff(m, direct); diff != "" {
				t.Fatalf("UnmarshalJSON differs from json.Unmarshal (-Unmarshal +UnmarshalJSON):\n%s", diff)
			}
		}
		if err != nil {
			return
		}

		// Nothing a message can hold makes these panic.
		_ = m.Validate()
		_ = m.Size()
		_, _, _ = m.Text(), m.Calls(), m.Results()
		if diff := cmp.Diff(m, m.Clone()); diff != "" {
			t.Fatalf("Clone() differs (-m +clone):\n%s", diff)
		}

		first, err := json.Marshal(m)
		if err != nil {
			t.Fatalf("read %q but cannot write it: %v", in, err)
		}
		var again message.Message
		if err := json.Unmarshal(first, &again); err != nil {
			t.Fatalf("cannot read back what was written:\n%s\n%v", first, err)
		}
		second, err := json.Marshal(again)
		if err != nil {
			t.Fatalf("cannot write again:\n%s\n%v", first, err)
		}
		if !bytes.Equal(first, second) {
			t.Fatalf("writing is not stable:\nfirst  %s\nsecond %s", first, second)
		}
		if diff := cmp.Diff(m, again); diff != "" {
			t.Fatalf("round trip changed the message (-read +read back):\n%s", diff)
		}
	})
}
