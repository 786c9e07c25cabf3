package langgraph

import (
	"encoding/json"
	"reflect"
	"testing"
	"testing/quick"
)

// A header kept as its patch from its parent's reads back as it was.
func TestMergeDiffRoundTrip(t *testing.T) {
	cases := [][2]string{
		{`{"v":4,"id":"a","channel_versions":{"messages":1,"x":2},"versions_seen":{"agent":{"x":1}}}`, `{"v":4,"id":"b","channel_versions":{"messages":2,"x":2,"y":1},"versions_seen":{"agent":{"x":2},"tools":{}}}`},
		{`{"a":{"b":1}}`, `{"a":5}`},
		{`{"a":5}`, `{"a":{"b":1}}`},
		{`{"a":{"b":1,"c":2}}`, `{"a":{}}`},
		{`{"a":[1,2]}`, `{"a":[1,2,3],"b":"s"}`},
		{`{"a":1,"b":2}`, `{}`},
	}
	for _, c := range cases {
		check(t, c[0], c[1])
	}
	f := func(a, b map[string]map[string]int8) bool {
		ja, _ := json.Marshal(a)
		jb, _ := json.Marshal(b)
		return check(t, string(ja), string(jb))
	}
	if err := quick.Check(f, nil); err != nil {
		t.Fatal(err)
	}
	// A null cannot be said by a patch: the header is kept whole.
	a, _ := decodeAny([]byte(`{"a":1}`))
	b, _ := decodeAny([]byte(`{"a":null}`))
	if _, ok := mergeDiff(a.(map[string]any), b.(map[string]any)); ok {
		t.Fatal("a null value made a patch")
	}
}

func check(t *testing.T, as, bs string) bool {
	t.Helper()
	a, err := decodeAny([]byte(as))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := decodeAny([]byte(bs))
	p, ok := mergeDiff(a.(map[string]any), b.(map[string]any))
	if !ok {
		t.Fatalf("%s → %s: no patch", as, bs)
	}
	// Through JSON, as it is kept.
	pj, _ := json.Marshal(p)
	pd, _ := decodeAny(pj)
	got := mergePatch(a, pd)
	if !reflect.DeepEqual(got, b) {
		t.Fatalf("%s + %s = %v, want %s", as, pj, got, bs)
	}
	return true
}
