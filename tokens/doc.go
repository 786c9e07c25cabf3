// Package tokens counts the tokens of messages, for keeping a thread within a
// model's context window.
//
// The encodings are OpenAI's o200k_base (GPT-4o, GPT-4.1, GPT-5, o-series)
// and cl100k_base (GPT-4, GPT-3.5 Turbo, text-embedding-3), byte-pair
// encodings whose counts are identical to tiktoken's for text whose
// characters Unicode 15.0 (Go's unicode tables) assigns; characters assigned
// later are classed as unassigned by the pre-tokenizer and may split
// differently. Their vocabularies are
// embedded in the binary (from github.com/pkoukk/tiktoken-go-loader) and read
// on first use, in about 20 ms for o200k_base and 14 ms for cl100k_base;
// nothing is fetched at run time. Encoding English text runs at more than
// 100 MB/s on one core.
//
// EncodingFor maps a model name to an encoding, and says whether the counts
// are exact (OpenAI's models) or an estimate (Anthropic's, whose tokenizer is
// not public, and open models with their own vocabularies).
//
// Count counts a message: a fixed overhead per message, as OpenAI's chat
// format spends it, plus the tokens of every content, tool calls, tool
// results and data included (see Counter.Count for what is counted exactly).
// Counts are cached by message id and encoding, and checked against the
// message's size: a message never changes once it has an id, so a hit costs
// tens of nanoseconds; ids from message.NewID never collide, and two
// messages that shared an id and a size would share a count.
//
//	enc, _ := tokens.EncodingFor("gpt-4.1")
//	n := tokens.CountRequest(msgs, enc)
package tokens
