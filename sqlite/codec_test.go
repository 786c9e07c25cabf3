package sqlite

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/loomthreads/loom/message"
)

// splitArrayBytewise is splitArray as it was first written, a byte at a
// time: the reference the faster scan must agree with on every input.
func splitArrayBytewise(b []byte) ([][]byte, bool) {
	if len(b) < 2 || b[0] != '[' || b[len(b)-1] != ']' {
		return nil, false
	}
	var out [][]byte
	depth, start, inString := 0, 1, false
	for i := 1; i < len(b)-1; i++ {
		c := b[i]
		if inString {
			switch c {
			case '\\':
				i++
			case '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth < 0 {
				return nil, false
			}
		case ',':
			if depth == 0 {
				out = append(out, b[start:i])
				start = i + 1
			}
		}
	}
	if depth != 0 || inString || start >= len(b)-1 {
		return nil, false
	}
	out = append(out, b[start:len(b)-1])
	for _, e := range out {
		if len(e) == 0 || e[0] != '{' {
			return nil, false
		}
	}
	return out, true
}

// decodeMessagesStd is what decodeMessages must return: the array read by
// encoding/json, each element by Message.UnmarshalJSON.
func decodeMessagesStd(b []byte) ([]message.Message, error) {
	var msgs []message.Message
	if err := json.Unmarshal(b, &msgs); err != nil {
		return nil, err
	}
	if len(msgs) == 0 {
		msgs = nil
	}
	return msgs, nil
}

// checkDecode fails t unless splitArray agrees with splitArrayBytewise and
// decodeMessages with encoding/json on b; it reports whether b decoded.
func checkDecode(t *testing.T, b []byte) bool {
	t.Helper()
	got, ok := splitArray(b)
	want, wantOK := splitArrayBytewise(b)
	if ok != wantOK {
		t.Fatalf("splitArray(%q) ok = %v, byte-at-a-time scan %v", b, ok, wantOK)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("splitArray(%q) elements (-byte-at-a-time +got):\n%s", b, diff)
	}
	if len(b) == 0 {
		return false // NULL: no messages, which encoding/json would not read
	}
	msgs, err := decodeMessages(b)
	wantMsgs, wantErr := decodeMessagesStd(b)
	if (err == nil) != (wantErr == nil) {
		t.Fatalf("decodeMessages(%q) error %v, encoding/json error %v", b, err, wantErr)
	}
	if diff := cmp.Diff(wantMsgs, msgs); diff != "" {
		t.Fatalf("decodeMessages(%q) (-encoding/json +got):\n%s", b, diff)
	}
	return err == nil
}

// tricky are strings that a scan of the array must cross whole: quotes,
// brackets, commas and backslashes in every arrangement, escapes, unicode.
var tricky = []string{
	``, `x`, `"`, `\`, `\\`, `\"`, `\\"`, `"\`, `\\\"`, `\\\\`,
	`"]`, `"}`, `},{`, `"},{"`, `[`, `]`, `{`, `}`, `,`, `[{"a":1}]`,
	"tab\tnewline\nnul\x00", "\u2028\u2029", `<&>`, "é日本語🙂", "\U0010ffff",
	"\xff\xfe invalid utf-8", `\u0022`, `\ud83d\ude42`,
}

func TestSplitArray(t *testing.T) {
	valid := []string{
		`[{}]`,
		`[{},{}]`,
		`[{"a":"b"},{"c":[1,{"d":"]"}]}]`,
		`[{"text":"he said \"hi\", then ]}"},{"x":"\\"}]`,
		`[{"text":"\\\\\""}]`,
		`[{"a":"\u00e9\ud83d\ude42"},{"b":"日本"}]`,
		`[{"a":[[[]]],"b":{"c":{"d":{}}}}]`,
		`[{ "a" : 1 },{"b":2 }]`,
	}
	// Each is refused by the scan (the caller then reads it with
	// encoding/json) or gives elements that are not whole objects.
	other := []string{
		``, `[`, `]`, `[]`, `[ ]`, `null`, `{}`, `[{}`, `{}]`, `[{}}`,
		`[{},]`, `[,{}]`, `[{},,{}]`, `[ {}]`, `[{} ]`, `[{}, {}]`,
		`[{"a":"]`, `[{"a":"\"}]`, `[{"a":"\\"}]`, `[{"a":"\\\"}]`, `[{"a":"x\`,
		`[{]`, `[{}]]`, `[[{}]]`, `[{}}{]`, `[}{]`, `[1]`, `[null]`, `["{"]`,
		`[{"a":1} x]`, `[{"a":1}{"b":2}]`, `[{"a":` + strings.Repeat("[", 20) + `]`,
	}
	for _, s := range valid {
		t.Run(s, func(t *testing.T) {
			if _, ok := splitArray([]byte(s)); !ok {
				t.Fatalf("splitArray(%q) refused a compact array of objects", s)
			}
			checkDecode(t, []byte(s))
		})
	}
	for _, s := range other {
		t.Run(s, func(t *testing.T) { checkDecode(t, []byte(s)) })
	}
	// Runs of backslashes before a quote, at every offset around where
	// the scan of a short string hands over to bytes.IndexByte.
	for pad := range 24 {
		for run := range 6 {
			s := `[{"a":"` + strings.Repeat("x", pad) + strings.Repeat(`\`, run) + `"},{"b":"]"}]`
			checkDecode(t, []byte(s))
			checkDecode(t, []byte(s[:len(s)-1]))
		}
	}
}

// randomValue is a JSON value for metadata: nested arrays and objects
// whose keys and strings are drawn from tricky.
func randomValue(r *rand.Rand, depth int) any {
	switch n := r.IntN(6); {
	case depth > 3 || n == 0:
		return tricky[r.IntN(len(tricky))]
	case n == 1:
		return json.Number(fmt.Sprint(r.IntN(1000) - 500))
	case n == 2:
		return r.IntN(2) == 0
	case n == 3:
		return nil
	case n == 4:
		a := make([]any, r.IntN(4))
		for i := range a {
			a[i] = randomValue(r, depth+1)
		}
		return a
	default:
		m := make(map[string]any)
		for range r.IntN(4) {
			m[tricky[r.IntN(len(tricky))]] = randomValue(r, depth+1)
		}
		return m
	}
}

func randomMessages(r *rand.Rand) []message.Message {
	pick := func() string {
		var b strings.Builder
		for range r.IntN(5) {
			b.WriteString(tricky[r.IntN(len(tricky))])
		}
		return b.String()
	}
	msgs := make([]message.Message, 1+r.IntN(5))
	for i := range msgs {
		var m message.Message
		switch r.IntN(4) {
		case 0:
			m = message.User(pick())
		case 1:
			m = message.ToolCall(pick(), pick(), `{"a":[1,{"b":"]}"}],"c":"\""}`)
		case 2:
			m = message.ToolResult(pick(), pick())
		default:
			m = message.New(message.RoleAssistant, message.Text{Text: pick()}, message.Reasoning{Text: pick()})
		}
		m.ID = pick()
		m.AuthorName = pick()
		m.CreatedAt = time.UnixMicro(r.Int64N(1 << 50)).UTC()
		if r.IntN(2) == 0 {
			m.Metadata = map[string]any{pick(): randomValue(r, 0), "k": randomValue(r, 0)}
		}
		msgs[i] = m
	}
	return msgs
}

// TestDecodeMessagesRandom writes random arrays of messages full of tricky
// strings and checks that they read back as written, that the fast scan
// splits them as the byte-at-a-time one does, and that every prefix and
// every one-byte change of them reads as encoding/json reads it.
func TestDecodeMessagesRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(27, 1))
	n := 300
	if testing.Short() {
		n = 30
	}
	for range n {
		msgs := randomMessages(r)
		b, err := encodeMessages(msgs)
		if err != nil {
			t.Fatal(err)
		}
		if !checkDecode(t, b) {
			t.Fatalf("cannot read back %s", b)
		}
		if _, ok := splitArray(b); !ok {
			t.Fatalf("splitArray refused what encodeMessages wrote: %s", b)
		}
		got, err := decodeMessages(b)
		if err != nil {
			t.Fatal(err)
		}
		want := make([]message.Message, len(msgs))
		for i, m := range msgs {
			j, err := m.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			if err := want[i].UnmarshalJSON(j); err != nil {
				t.Fatal(err)
			}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("read back %s (-want +got):\n%s", b, diff)
		}
		for range 8 {
			checkDecode(t, b[:r.IntN(len(b))])
			c := append([]byte(nil), b...)
			c[r.IntN(len(c))] = `"\[]{},: ax`[r.IntN(11)]
			checkDecode(t, c)
		}
	}
}

// FuzzDecodeMessages checks, on any input, that the fast scan splits as
// the byte-at-a-time one did, and that decodeMessages returns what
// encoding/json reads (an error where it gives one), never panicking.
func FuzzDecodeMessages(f *testing.F) {
	r := rand.New(rand.NewPCG(27, 2))
	for range 8 {
		b, err := encodeMessages(randomMessages(r))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{`[{}]`, `[{"a":"\\\""}]`, `[{"a":"\"}]`, `[{},]`, `[ {}]`, `null`, `[]`, ``} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkDecode(t, b) })
}
