package message

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// checkEncoders fails t unless AppendJSON and MarshalJSON write m exactly as
// marshalSlow does, and fail where it fails, and likewise MarshalContent and
// marshalContentSlow for each of m's contents.
func checkEncoders(t testing.TB, m Message) {
	t.Helper()
	want, wantErr := m.marshalSlow()

	prefix := []byte(`prefix`)
	got, err := m.AppendJSON(prefix[:len(prefix):len(prefix)])
	switch {
	case (err == nil) != (wantErr == nil):
		t.Fatalf("AppendJSON error %v, marshalSlow error %v, for %s", err, wantErr, describe(m))
	case err != nil && string(got) != "prefix":
		t.Fatalf("AppendJSON failed (%v) but returned %q, want b unchanged", err, truncateBytes(got))
	case err == nil && !bytes.HasPrefix(got, prefix):
		t.Fatalf("AppendJSON lost the prefix of b: %q", truncateBytes(got))
	case err == nil:
		checkSame(t, "AppendJSON", got[len(prefix):], want, m)
	}

	got, err = m.MarshalJSON()
	switch {
	case (err == nil) != (wantErr == nil):
		t.Fatalf("MarshalJSON error %v, marshalSlow error %v, for %s", err, wantErr, describe(m))
	case err != nil && got != nil:
		t.Fatalf("MarshalJSON failed (%v) but returned %q", err, truncateBytes(got))
	case err == nil:
		checkSame(t, "MarshalJSON", got, want, m)
	}

	for i, c := range m.Contents {
		want, wantErr := marshalContentSlow(c)
		got, err := MarshalContent(c)
		if (err == nil) != (wantErr == nil) {
			t.Fatalf("contents[%d]: MarshalContent error %v, marshalContentSlow error %v, for %s", i, err, wantErr, describe(m))
		}
		if err == nil {
			checkSame(t, fmt.Sprintf("contents[%d]: MarshalContent", i), got, want, m)
		}
	}
}

// checkSame fails t unless got is want, showing where they part.
func checkSame(t testing.TB, what string, got, want []byte, m Message) {
	t.Helper()
	if bytes.Equal(got, want) {
		return
	}
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	from := max(0, i-40)
	t.Fatalf("%s differs from encoding/json at byte %d:\n got …%q\nwant …%q\nfor %s",
		what, i, truncateBytes(got[from:]), truncateBytes(want[from:]), describe(m))
}

func describe(m Message) string { return truncateBytes(fmt.Appendf(nil, "%#v", m)) }

func truncateBytes(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "…"
	}
	return string(b)
}

// edgeStrings are strings that the escaping must get right.
var edgeStrings = func() []string {
	var ascii, all strings.Builder
	for c := range 128 {
		ascii.WriteByte(byte(c))
	}
	for c := range 256 {
		all.WriteByte(byte(c))
	}
	return []string{
		"",
		"a",
		"What is the weather in Paris?",
		"héllo wörld 日本語 😀 e\u0301 \U0010ffff",
		"<b>&amp;</b> <script>alert('x')</script> a>b",
		`"quoted" \back\slash\ /slash/`,
		"\b\f\n\r\t",
		"\x00\x01\x1f\x7f",
		ascii.String(),
		all.String(),
		"\u2028\u2029 line\u2028separator\u2029",
		"\ufffd is U+FFFD",
		"\xff",
		"\xc3",
		"a\xe2\x80",
		"\xe2\x80\xa8\xe2\x80",
		"\xf0\xe2\x80\xa8",
		"\xed\xa0\x80\xed\xb0\x80", // a surrogate pair in UTF-8, which is not UTF-8
		"\xf4\x90\x80\x80",         // beyond U+10FFFF
		"\xc0\xaf",                 // overlong
		`{"city":"Paris","days":[1,2],"note":"<\u00e9>"}`,
		strings.Repeat("The quick brown fox <jumps> over the lazy dog & \"runs\"\n\té\u2028", 2000),
		strings.Repeat("x", 1<<16),
	}
}()

// everyContent returns a content of each type, and some empty ones, with s
// in each string.
func everyContent(s string) []Content {
	raw, err := canonicalRaw(fmt.Appendf(nil, `{"type":"citation","quote":%s,"spans":[1,2.5e3,{"k":null}]}`, mustJSON(s)))
	if err != nil {
		panic(err)
	}
	return []Content{
		Text{Text: s},
		Text{},
		FunctionCall{CallID: s, Name: s, Arguments: s},
		FunctionCall{CallID: s, Name: s},
		FunctionResult{CallID: s, Result: s, IsError: true},
		FunctionResult{CallID: s},
		Data{MediaType: s, URI: s, Data: []byte(s), Name: s},
		Data{Data: []byte{}},
		Data{},
		Reasoning{Text: s, Protected: s},
		Reasoning{},
		Usage{InputTokens: int64(len(s)), OutputTokens: -1, TotalTokens: math.MaxInt64, CachedInputTokens: math.MinInt64},
		Usage{},
		Error{Code: s, Message: s},
		Error{},
		Unknown{Raw: raw},
	}
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// encoderMessages returns messages that take every path of the encoder
// and of encoding/json, those it refuses included.
func encoderMessages() []Message {
	created := time.Date(2025, 3, 14, 15, 9, 26, 535897932, time.UTC)
	var msgs []Message
	for _, s := range edgeStrings {
		msgs = append(msgs, Message{
			ID: s, Role: Role(s), AuthorName: s,
			Contents:  everyContent(s),
			CreatedAt: created,
			Metadata:  map[string]any{"s": s, s: json.Number("-1.5e-7"), "l": []any{s, map[string]any{s: s}}},
		})
	}

	for _, t := range []time.Time{
		{},
		created,
		time.Date(2025, 3, 14, 15, 9, 27, 0, time.UTC),
		time.Date(2025, 3, 14, 15, 9, 27, 500000000, time.UTC),
		time.Date(2025, 3, 14, 16, 9, 26, 5e8, time.FixedZone("CET", 3600)),
		time.Date(2025, 3, 14, 16, 9, 26, 5e8, time.FixedZone("", 0)),
		time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.FixedZone("", -(23*3600+59*60))),
		time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2025, 1, 1, 0, 0, 0, 0, time.FixedZone("", 3601)), // seconds in the offset
		time.Time{}.In(time.FixedZone("", 3600)),                    // zero, in another zone
		time.Now(),                                                  // with a monotonic reading
		time.Now().In(time.Local),
		// RFC 3339 cannot write these.
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2025, 1, 1, 0, 0, 0, 0, time.FixedZone("", 24*3600)),
	} {
		msgs = append(msgs, Message{Role: RoleUser, Contents: []Content{Text{Text: "t"}}, CreatedAt: t})
	}

	deep := any(json.Number("1"))
	for range maxDepth + 10 {
		deep = []any{map[string]any{"d": deep}}
	}
	deepList := any(nil)
	for range maxDepth + 10 {
		deepList = []any{deepList}
	}
	cyclic := map[string]any{}
	cyclic["self"] = cyclic
	cyclicList := []any{nil}
	cyclicList[0] = cyclicList
	for _, md := range []map[string]any{
		nil,
		{},
		{"b": true, "f": false, "n": nil, "s": "x", "num": json.Number("12345678901234567890")},
		{"z": 1, "a": 2, "é": 3, "A": 4, "\xff": 5, "<&>": 6, "": 7, "a\u2028": 8}, // sorted by bytes
		{"nested": map[string]any{"l": []any{}, "o": map[string]any{}, "nl": []any(nil), "no": map[string]any(nil)}},
		{"numbers": []any{json.Number("0"), json.Number("-0"), json.Number("1e400"), json.Number("0.10000000000000000001"), json.Number("-9223372036854775809"), json.Number("1E+2")}},
		{"many": func() map[string]any {
			m := map[string]any{}
			for i := range 40 {
				m[fmt.Sprint("k", i)] = i
			}
			return m
		}()},
		// Go numbers, which encoding/json writes.
		{"i": 1, "i8": int8(-8), "i16": int16(16), "i32": int32(-32), "i64": int64(math.MinInt64), "u": uint(1), "u8": uint8(8), "u16": uint16(16), "u32": uint32(32), "u64": uint64(math.MaxUint64)},
		{"f": 0.25, "big": 1e21, "small": 1e-7, "neg0": math.Copysign(0, -1), "f32": float32(0.1), "third": 1.0 / 3, "e": []any{1e20, 1e-6, 123456789.0}},
		{"mixed": []any{"s", json.Number("1"), 2, 3.5, map[string]any{"x": float32(1e-7)}}},
		// What encoding/json writes its own way or refuses.
		{"empty number": json.Number("")},
		{"bad number": json.Number("01")},
		{"bad number": json.Number("abc")},
		{"raw": json.RawMessage(` {"a" : "<b>"} `)},
		{"strings": map[string]string{"b": "2", "a": "1"}},
		{"struct": struct{ A int }{1}},
		{"pointer": new(int)},
		{"time": created},
		{"nan": math.NaN()},
		{"inf": math.Inf(-1)},
		{"chan": make(chan int)},
		{"func": func() {}},
		{"deep": deep, "deep list": deepList},
		{"cyclic": cyclic},
		{"cyclic list": cyclicList},
	} {
		msgs = append(msgs, Message{Role: RoleUser, Contents: []Content{}, Metadata: md})
	}

	for _, raw := range []string{
		`{"type":"citation","url":"https://example.com/paris","spans":[1,2]}`,
		`{"spans":[1,2],"type":"x"}`,
		`{"type":"text","text":"an unknown of a known type"}`,
		`{"type":"x","a":"\u003c\u2028","b":"\"\\\/\b\f\n\r\t\u0000"}`,
		"{\"type\":\"x\",\"a\":\"\xff\xe2\x80\"}",
		`{"type":"x","n":[-0.0e-0,1E+400,{"":{}}],"t":true,"f":false,"z":null}`,
		`{"type":"x","type":"y"}`,
		`{"type":"x","Type":"y"}`,
		`{"TYPE":"x"}`,
		`{"\u0074ype":"x"}`,
		`{"type":"x","\u0074ype":""}`,
		`{"type":"x","TYPE":""}`,
		`{"type":"x","tYpE":null}`,
		`{"Type":"","type":"x"}`,
		`{"type":"\u0078"}`,
		`{"type":"x", "a":1}`,
		" {\"type\":\"x\"}\n",
		`{"type":"x","a":"a b"}`,
		`{"type":"x","a":"\"", "b":1}`,
		`{"type":"x","a":"<b>&</b>"}`,
		"{\"type\":\"x\",\"a\":\"\u2028\u2029\"}",
		`{"type":"x","a":[` + strings.Repeat("[", 1200) + strings.Repeat("]", 1200) + `]}`,
		// What MarshalContent refuses.
		``,
		`null`,
		`"x"`,
		`[]`,
		`{}`,
		`{"type":""}`,
		`{"type":null}`,
		`{"type":1}`,
		`{"type":"x"`,
		`{"type":"x",}`,
		`{"type":"x"}{}`,
		`{"type":"x","a":01}`,
		"{\"type\":\"x\",\"a\":\"\x01\"}",
	} {
		msgs = append(msgs, New(RoleTool, Unknown{Raw: []byte(raw)}))
	}

	type otherContent struct{ Text } // a Content, but not one of the variants
	for _, c := range []Content{nil, &Text{Text: "hi"}, otherContent{}} {
		msgs = append(msgs, New(RoleUser, Text{Text: "ok"}, c))
	}
	for n := range 6 {
		msgs = append(msgs, New(RoleUser, Data{Data: bytes.Repeat([]byte{0xfb}, n)}))
	}
	msgs = append(msgs, Message{}, Message{Contents: []Content{}})
	return append(msgs, randomMessages(rand.New(rand.NewPCG(1, 2)), 3000)...)
}

// randomMessages returns n messages made of random pieces of edgeStrings.
func randomMessages(r *rand.Rand, n int) []Message {
	str := func() string {
		var b strings.Builder
		for range r.IntN(4) {
			s := edgeStrings[r.IntN(len(edgeStrings))]
			if len(s) > 0 {
				i := r.IntN(len(s))
				s = s[i:min(len(s), i+1+r.IntN(64))] // may cut a rune
			}
			b.WriteString(s)
		}
		return b.String()
	}
	var value func(depth int) any
	object := func(depth int) map[string]any {
		m := make(map[string]any)
		for range r.IntN(5) {
			m[str()] = value(depth + 1)
		}
		return m
	}
	value = func(depth int) any {
		switch r.IntN(9) {
		case 0:
			return nil
		case 1:
			return r.IntN(2) == 0
		case 2:
			return json.Number(fmt.Sprint(r.Int64() >> r.IntN(64)))
		case 3:
			return json.Number(fmt.Sprintf("%g", r.NormFloat64()*math.Pow(10, float64(r.IntN(60)-30))))
		case 4, 5:
			if depth < 4 {
				l := make([]any, r.IntN(4))
				for i := range l {
					l[i] = value(depth + 1)
				}
				return l
			}
		case 6, 7:
			if depth < 4 {
				return object(depth)
			}
		}
		return str()
	}
	msgs := make([]Message, n)
	for i := range msgs {
		m := Message{Role: Role(str())}
		if r.IntN(2) == 0 {
			m.ID = str()
		}
		if r.IntN(3) == 0 {
			m.AuthorName = str()
		}
		for range r.IntN(5) {
			s := str()
			cs := everyContent(s)
			m.Contents = append(m.Contents, cs[r.IntN(len(cs))])
		}
		if r.IntN(2) == 0 {
			zone := time.FixedZone("", (r.IntN(48*60)-24*60)*60)
			m.CreatedAt = time.Unix(r.Int64N(1<<35)-1<<34, r.Int64N(1e9)).In(zone)
		}
		if r.IntN(2) == 0 {
			m.Metadata = object(1)
		}
		msgs[i] = m
	}
	return msgs
}

// TestEncoderMatchesReference checks AppendJSON, MarshalJSON and
// MarshalContent against encoding/json on the golden files and on the
// messages of encoderMessages.
func TestEncoderMatchesReference(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range files {
		golden, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		golden = bytes.TrimSuffix(golden, []byte("\n"))
		var m Message
		if name := filepath.Base(file); strings.HasPrefix(name, "message_") {
			if err := m.UnmarshalJSON(golden); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		} else {
			c, err := UnmarshalContent(golden)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if got, err := MarshalContent(c); err != nil || !bytes.Equal(got, golden) {
				t.Errorf("%s: MarshalContent = %s, %v; want the file", name, got, err)
			}
			m = New(RoleUser, c)
		}
		checkEncoders(t, m)
		if got, err := m.AppendJSON(nil); strings.HasPrefix(filepath.Base(file), "message_") && (err != nil || !bytes.Equal(got, golden)) {
			t.Errorf("%s: AppendJSON = %s, %v; want the file", file, got, err)
		}
	}

	for _, m := range encoderMessages() {
		checkEncoders(t, m)
	}
}

// TestEncoderErrors checks that AppendJSON names the member it could not
// write.
func TestEncoderErrors(t *testing.T) {
	tests := []struct {
		m    Message
		want string
	}{
		{New(RoleUser, Text{}, nil), "contents[1]: nil content"},
		{New(RoleUser, &Text{}), "contents[0]: content type *message.Text"},
		{New(RoleUser, Unknown{Raw: []byte(`{"type":""}`)}), "contents[0]: content: missing type"},
		{Message{Role: RoleUser, CreatedAt: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}, "created_at: "},
		{Message{Role: RoleUser, Metadata: map[string]any{"f": math.NaN()}}, "metadata: "},
	}
	for _, tt := range tests {
		_, err := tt.m.AppendJSON(nil)
		if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("AppendJSON(%s) error = %v, want one starting %q", describe(tt.m), err, tt.want)
		}
	}
}

// TestCanonicalUnknownWritesRaw checks that what the decoder stores in
// Unknown.Raw is written as it is, without encoding/json.
func TestCanonicalUnknownWritesRaw(t *testing.T) {
	for _, in := range []string{
		`{"type":"citation","url":"https://example.com/paris","spans":[1,2]}`,
		` { "type" : "x" , "a" : "<b> & \u2028" , "n" : [ 1 , { } ] } `,
		`{"a":{"type":1},"type":"x","b":"\"\\"}`,
	} {
		c, err := UnmarshalContent([]byte(in))
		if err != nil {
			t.Fatal(err)
		}
		raw := c.(Unknown).Raw
		if !canonicalUnknown(raw) {
			t.Errorf("canonicalUnknown(%s) = false, want true", raw)
		}
		if out, err := MarshalContent(c); err != nil || !bytes.Equal(out, raw) {
			t.Errorf("MarshalContent(%s) = %s, %v; want the raw JSON as it is", raw, out, err)
		}
	}
}

// FuzzEncoder checks that the hand-written encoder writes what encoding/json
// writes, and fails where it fails: for the message the input decodes to, if
// it does, for an Unknown whose raw JSON is the input, and for a message
// that holds the input in each of its strings.
func FuzzEncoder(f *testing.F) {
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
		`{"role":"user","contents":[{"type":"text","text":"<b>&\u2028 \"q\" \\ \/ \b\f\n\r\t\u0001\u007f \u00e9 é 😀 \ud800"}]}`,
		"{\"role\":\"user\",\"contents\":[{\"type\":\"text\",\"text\":\"\xff\xc3 \xe2\x80\xa8\"}]}",
		`{"role":"tool","contents":[{"type":"function_result","call_id":"c","result":"{\"a\":[1,2]}","is_error":true}]}`,
		`{"role":"user","contents":[{"type":"data","media_type":"image/png","data":"iVBORw0KGgo=","name":"p"},{"type":"data","data":""}]}`,
		`{"role":"user","contents":[{"type":"usage","input_tokens":-5,"reasoning_tokens":123456789012345678}]}`,
		`{"role":"user","contents":[{"type":"citation","a":[1,{"b":"<>"}],"c":-1.5e-3}]}`,
		`{"role":"user","contents":[{ "type" : "x" , "TYPE" : "y" }]}`,
		`{"role":"user","contents":[],"created_at":"2025-03-14T16:09:26.5+01:00"}`,
		`{"role":"user","contents":[],"created_at":"9999-12-31T23:59:59.999999999-23:59"}`,
		`{"role":"user","contents":[],"metadata":{"b":[1,"x",true,false,null,{}],"a":1e400,"\u00e9":{"<":[]}}}`,
		`{"type":"x","a":"<b>"}`,
		`{"type":"x"} `,
		`{"Type":"x"}`,
		`[1,"a",{"b":null}]`,
	} {
		f.Add([]byte(s))
	}

	f.Fuzz(func(t *testing.T, in []byte) {
		var m Message
		if err := m.UnmarshalJSON(in); err == nil {
			checkEncoders(t, m)
		}
		checkEncoders(t, New(RoleUser, Unknown{Raw: in}))

		s := string(in)
		m = Message{ID: s, Role: Role(s), AuthorName: s, Contents: everyContent(s), Metadata: map[string]any{s: s}}
		var v any // with float64 numbers, which encoding/json writes
		if json.Unmarshal(in, &v) == nil {
			m.Metadata["v"] = v
		}
		checkEncoders(t, m)
	})
}
