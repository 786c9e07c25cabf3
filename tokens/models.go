package tokens

import "strings"

// model maps the models whose names start with prefix to an encoding.
type model struct {
	prefix string
	enc    Encoding
	// loose entries match any name that starts with prefix; the others
	// only a name that is prefix or continues with one of "-:@_", so that
	// "gpt-4" does not claim "gpt-4.2" or "gpt-4o".
	loose bool
}

// openAI are the OpenAI models, whose encodings are known: counts are exact.
// The longest matching prefix wins.
var openAI = []model{
	{prefix: "gpt-5", enc: O200kBase},
	{prefix: "gpt-5.", enc: O200kBase, loose: true}, // gpt-5.1, gpt-5.2-codex, …
	{prefix: "gpt-4.1", enc: O200kBase},
	{prefix: "gpt-4.5", enc: O200kBase},
	{prefix: "gpt-4o", enc: O200kBase},
	{prefix: "chatgpt-4o", enc: O200kBase},
	{prefix: "gpt-oss", enc: O200kBase}, // o200k_harmony: o200k_base plus special tokens
	{prefix: "o1", enc: O200kBase},
	{prefix: "o3", enc: O200kBase},
	{prefix: "o4-mini", enc: O200kBase},
	{prefix: "codex-mini", enc: O200kBase},
	{prefix: "gpt-realtime", enc: O200kBase},
	{prefix: "gpt-audio", enc: O200kBase},
	{prefix: "gpt-4", enc: Cl100kBase}, // gpt-4, gpt-4-turbo, gpt-4-32k, …
	{prefix: "gpt-3.5-turbo", enc: Cl100kBase},
	{prefix: "gpt-3.5", enc: Cl100kBase},
	{prefix: "gpt-35-turbo", enc: Cl100kBase}, // Azure's spelling
	{prefix: "text-embedding-3", enc: Cl100kBase},
	{prefix: "text-embedding-ada-002", enc: Cl100kBase},
	{prefix: "davinci-002", enc: Cl100kBase},
	{prefix: "babbage-002", enc: Cl100kBase},
}

// estimated are model families whose tokenizers are either private or not
// one of these encodings: a count is an estimate, and the encoding is the one
// whose counts are closest or, when in doubt, slightly higher.
var estimated = []model{
	// Anthropic's tokenizer is not public. Claude's counts of English are
	// usually somewhat higher than o200k's: leave a margin.
	{prefix: "claude", enc: O200kBase, loose: true},
	// Llama 3 and later extend cl100k's vocabulary (128k tokens) with the
	// same pre-tokenizer, so cl100k counts slightly high. Llama 2's 32k
	// SentencePiece vocabulary counts higher still.
	{prefix: "llama", enc: Cl100kBase, loose: true},
	{prefix: "codellama", enc: Cl100kBase, loose: true},
	// Qwen's 151k vocabulary is built on cl100k's.
	{prefix: "qwen", enc: Cl100kBase, loose: true},
	{prefix: "qwq", enc: Cl100kBase, loose: true},
	// Phi-4's vocabulary is cl100k's plus special tokens.
	{prefix: "phi", enc: Cl100kBase, loose: true},
	// Large vocabularies (128k–256k): Mistral's Tekken, Gemma's and
	// Gemini's SentencePiece, DeepSeek's and others' BPE.
	{prefix: "mistral", enc: O200kBase, loose: true},
	{prefix: "mixtral", enc: O200kBase, loose: true},
	{prefix: "ministral", enc: O200kBase, loose: true},
	{prefix: "magistral", enc: O200kBase, loose: true},
	{prefix: "codestral", enc: O200kBase, loose: true},
	{prefix: "devstral", enc: O200kBase, loose: true},
	{prefix: "pixtral", enc: O200kBase, loose: true},
	{prefix: "gemma", enc: O200kBase, loose: true},
	{prefix: "gemini", enc: O200kBase, loose: true},
	{prefix: "deepseek", enc: O200kBase, loose: true},
	{prefix: "grok", enc: O200kBase, loose: true},
	{prefix: "command", enc: O200kBase, loose: true},
}

// EncodingFor returns the encoding to count tokens for model with, and
// whether the counts are exact: true for OpenAI's models (gpt-5, gpt-4.1,
// gpt-4o, o1, o3 and o4-mini use o200k_base; gpt-4, gpt-3.5-turbo and the
// text-embedding-3 models cl100k_base), false for an estimate: Anthropic's
// claude-* models (o200k_base), open models (llama, qwen and phi with
// cl100k_base; mistral, gemma, gemini, deepseek and others with o200k_base),
// and any model it does not know (o200k_base).
//
// Names are matched by prefix, ignoring case, a provider prefix ending in "/"
// ("openai/gpt-4o", "meta-llama/Llama-3.1-8B") and a fine-tune's "ft:". Model
// families are also found after a "." or ":" ("openai:gpt-4",
// "us.anthropic.claude-sonnet-4", "ollama:llama3.1").
func EncodingFor(model string) (enc Encoding, exact bool) {
	name := strings.ToLower(model)
	name = name[strings.LastIndexByte(name, '/')+1:]
	name = strings.TrimPrefix(name, "ft:")
	if m, ok := match(openAI, name); ok {
		return m.enc, true
	}
	for s := name; ; {
		if m, ok := match(openAI, s); ok { // "openai:gpt-4", "azure.gpt-35-turbo"
			return m.enc, true
		}
		if m, ok := match(estimated, s); ok {
			return m.enc, false
		}
		i := strings.IndexAny(s, ".:")
		if i < 0 {
			break
		}
		s = s[i+1:]
	}
	return O200kBase, false
}

// match returns the entry of table with the longest prefix of name.
func match(table []model, name string) (model, bool) {
	var best model
	found := false
	for _, m := range table {
		if !strings.HasPrefix(name, m.prefix) || len(m.prefix) <= len(best.prefix) && found {
			continue
		}
		if !m.loose && len(name) > len(m.prefix) && !strings.ContainsRune("-:@_", rune(name[len(m.prefix)])) {
			continue
		}
		best, found = m, true
	}
	return best, found
}
