package jsonerr

import (
	"encoding/json"
	"strings"
	"testing"
)

type inner struct {
	N int `json:"n"`
}

type body struct {
	ID     string            `json:"id"`
	Labels map[string]string `json:"labels"`
	Tags   []string          `json:"tags"`
	Inner  *inner            `json:"inner"`
	Ratio  float64           `json:"ratio"`
	On     bool              `json:"on"`
}

// TestDescribe checks that each kind of decoding error is told as a
// sentence that names the member and the JSON it should hold, with no Go
// type, field or package name.
func TestDescribe(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"id":5}`, "id: expected a string, got a number"},
		{`[]`, "expected a JSON object, got an array"},
		{`"x"`, "expected a JSON object, got a string"},
		{`{"labels":[]}`, "labels: expected an object, got an array"},
		{`{"labels":{"a":1}}`, "labels: expected a string as each value, got a number"},
		{`{"tags":[true]}`, "tags: expected a string as each item, got true or false"},
		{`{"inner":{"n":1.5}}`, "inner.n: expected an integer, got the number 1.5"},
		{`{"ratio":"1"}`, "ratio: expected a number, got a string"},
		{`{"on":"yes"}`, "on: expected true or false, got a string"},
		{`{"id":`, "not valid JSON: it ends before its last value does"},
		{`{"id" 1}`, "not valid JSON at byte 7: invalid character '1' after object key"},
		{`{"nope":1}`, `unknown member "nope"`},
	} {
		var v body
		dec := json.NewDecoder(strings.NewReader(tc.in))
		dec.DisallowUnknownFields()
		err := dec.Decode(&v)
		if err == nil {
			t.Errorf("%s: no error", tc.in)
			continue
		}
		got := Describe(&v, err)
		if got != tc.want {
			t.Errorf("%s: %q, want %q", tc.in, got, tc.want)
		}
		for _, g := range []string{"Go ", "jsonerr.", "json:", "int", "float64", "map["} {
			if strings.Contains(got, g) && !strings.Contains(tc.want, g) {
				t.Errorf("%s: %q speaks Go (%q)", tc.in, got, g)
			}
		}
	}
}
