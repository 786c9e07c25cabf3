package tokens

import "testing"

// FuzzEncode checks, for any bytes: Encode never panics, Decode(Encode(s))
// is s, Count agrees with Encode and is additive over the pieces, and the
// pre-tokenizers split as tiktoken's patterns do.
func FuzzEncode(f *testing.F) {
	for _, s := range []string{
		"", "hello world", "Hello, 使用GPT-4！", "don't DON'T", "today\n \n", " \u00850",
		"1234567", "a\n  ", "e\u0301", "\xff\xc3(", "👍🏽", "x = {\"a\": [1, 2]}\r\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, enc := range []Encoding{O200kBase, Cl100kBase} {
			checkRoundTrip(t, enc, s)
		}
		checkSplit(t, s)
	})
}
