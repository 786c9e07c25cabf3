package tokens

import (
	"hash/maphash"
	"mime"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/loomthreads/loom/message"
)

// The per-message overhead, as OpenAI's chat format spends it and as
// OpenAI's own cookbook counts it: each message costs MessageTokens for its
// framing (<|start|>, <|message|>, <|end|>) plus the tokens of its role, and
// a message with an author name costs NameTokens more plus the tokens of the
// name. A request costs ReplyTokens once, for the <|start|>assistant<|message|>
// that primes the reply.
const (
	MessageTokens = 3
	NameTokens    = 1
	ReplyTokens   = 3
)

// DefaultDataTokens is the estimate for one Data content that is not text
// (an image, a PDF, audio), since what a provider charges depends on the
// image's size, the detail asked for and the provider: OpenAI's GPT-4o
// charges 85 tokens plus 170 per 512-pixel tile (at most 1,105 for one
// high-detail image), Anthropic width×height/750 (about 1,600 at most, once
// the image is scaled to 1.15 megapixels). The default is the larger, so that
// a budget errs on the side of fitting; set CounterOptions.DataTokens to what
// your provider charges for what you send.
const DefaultDataTokens = 1600

// DefaultCacheSize is the number of message counts a Counter remembers by
// default: at about 100 bytes an entry, some 6 MB.
const DefaultCacheSize = 1 << 16

// CounterOptions configures a Counter. The zero value means the defaults.
type CounterOptions struct {
	// CacheSize is the most message counts the Counter remembers; the
	// least recently used are forgotten first (approximately: the cache is
	// a sharded clock). 0 means DefaultCacheSize; a negative size turns the
	// cache off.
	CacheSize int
	// DataTokens is the estimate for one Data content that is not inline
	// text. 0 means DefaultDataTokens.
	DataTokens int
}

// A Counter counts the tokens of messages and remembers the count of each
// message by (message id, encoding): a message never changes once it has an
// id, so a count never needs forgetting, and counting a thread a second time
// costs a lookup per message. A Counter is safe for concurrent use.
//
// Ids are unique within a thread but may repeat across threads and tenants
// ("1", "2", …), so the cache also keeps each message's Size and counts a
// message again when it differs. Two messages with one id and one size
// would share a count; ids from message.NewID never collide. Messages
// without an id are counted every time.
type Counter struct {
	dataTokens int
	seed       maphash.Seed
	shards     []shard // a power of two of them; nil if the cache is off
}

// NewCounter returns a Counter; opts may be nil for the defaults.
func NewCounter(opts *CounterOptions) *Counter {
	var o CounterOptions
	if opts != nil {
		o = *opts
	}
	c := &Counter{dataTokens: o.DataTokens, seed: maphash.MakeSeed()}
	if c.dataTokens <= 0 {
		c.dataTokens = DefaultDataTokens
	}
	size := o.CacheSize
	if size == 0 {
		size = DefaultCacheSize
	}
	if size > 0 {
		n := 1
		for n < 64 && n*64 < size { // up to 64 shards, more than 64 entries each where size allows
			n *= 2
		}
		c.shards = make([]shard, n)
		for i := range c.shards {
			c.shards[i].size = (size + n - 1) / n
		}
	}
	return c
}

var defaultCounter = sync.OnceValue(func() *Counter { return NewCounter(nil) })

// Count returns the tokens of m in enc, with the package's default Counter;
// see Counter.Count.
func Count(m message.Message, enc Encoding) int { return defaultCounter().Count(m, enc) }

// CountRequest returns the tokens of a request made of msgs in enc, with the
// package's default Counter; see Counter.CountRequest.
func CountRequest(msgs []message.Message, enc Encoding) int {
	return defaultCounter().CountRequest(msgs, enc)
}

// CountRequest returns the tokens of a request made of msgs: the sum of
// their counts plus ReplyTokens.
func (c *Counter) CountRequest(msgs []message.Message, enc Encoding) int {
	n := ReplyTokens
	for _, m := range msgs {
		n += c.Count(m, enc)
	}
	return n
}

// Count returns the tokens of m in enc: MessageTokens, the tokens of its
// role, NameTokens and the tokens of its author name if it has one, and the
// tokens of each content:
//   - Text: its text.
//   - FunctionCall: its name and its arguments.
//   - FunctionResult: its result.
//   - Reasoning: its text. The protected payload is not counted: it is an
//     opaque signature or ciphertext whose cost is the provider's to state.
//   - Data: the tokens of its bytes if they are inline text (a text/* media
//     type, JSON, XML or YAML, valid UTF-8); otherwise the Counter's flat
//     estimate, DefaultDataTokens unless configured.
//   - Error: its code and its message.
//   - Unknown: its raw JSON.
//   - Usage: nothing; it records what a call cost and is never sent to a
//     model.
//
// Per-content framing (a tool call's JSON wrapper, for one) is not counted:
// it differs by provider and API and is small next to the contents.
func (c *Counter) Count(m message.Message, enc Encoding) int {
	if m.ID == "" || c.shards == nil {
		return c.count(m, enc)
	}
	key := cacheKey{m.ID, enc.spec}
	// The size is a fingerprint: two messages that share an id (ids are
	// unique within a thread, not across threads or tenants) almost never
	// share it too, and a mismatch is a miss.
	fp := m.Size()
	sh := &c.shards[maphash.String(c.seed, m.ID)&uint64(len(c.shards)-1)]
	if n, ok := sh.get(key, fp); ok {
		return n
	}
	n := c.count(m, enc)
	sh.put(key, fp, n)
	return n
}

func (c *Counter) count(m message.Message, enc Encoding) int {
	n := MessageTokens + enc.Count(string(m.Role))
	if m.AuthorName != "" {
		n += NameTokens + enc.Count(m.AuthorName)
	}
	for _, ct := range m.Contents {
		switch ct := ct.(type) {
		case message.Text:
			n += enc.Count(ct.Text)
		case message.FunctionCall:
			n += enc.Count(ct.Name) + enc.Count(ct.Arguments)
		case message.FunctionResult:
			n += enc.Count(ct.Result)
		case message.Reasoning:
			n += enc.Count(ct.Text)
		case message.Data:
			if isText(ct) {
				n += enc.Count(string(ct.Data))
			} else {
				n += c.dataTokens
			}
		case message.Error:
			n += enc.Count(ct.Code) + enc.Count(ct.Message)
		case message.Unknown:
			n += enc.Count(string(ct.Raw))
		case message.Usage:
		}
	}
	return n
}

// isText reports whether d holds inline text.
func isText(d message.Data) bool {
	if len(d.Data) == 0 {
		return false
	}
	mt, _, err := mime.ParseMediaType(d.MediaType)
	if err != nil {
		return false
	}
	text := strings.HasPrefix(mt, "text/") ||
		strings.HasSuffix(mt, "+json") || strings.HasSuffix(mt, "+xml") ||
		mt == "application/json" || mt == "application/xml" ||
		mt == "application/yaml" || mt == "application/x-yaml"
	return text && utf8.Valid(d.Data)
}

// cacheKey names a count.
type cacheKey struct {
	id  string
	enc *spec
}

// shard is one part of the cache: a clock of slots. A hit sets the slot's
// reference bit; an insertion into a full shard sweeps the hand forward,
// clearing bits, to the first slot whose bit is clear, and replaces it.
type shard struct {
	mu    sync.Mutex
	index map[cacheKey]int32 // nil until the first put
	slots []slot
	size  int // the most slots
	hand  int
	_     [32]byte // spreads shards apart in memory, to cut false sharing
}

type slot struct {
	key cacheKey
	fp  int // the message's Size when it was counted
	n   int
	ref bool
}

func (s *shard) get(k cacheKey, fp int) (int, bool) {
	s.mu.Lock()
	i, ok := s.index[k]
	var n int
	if ok = ok && s.slots[i].fp == fp; ok {
		s.slots[i].ref = true
		n = s.slots[i].n
	}
	s.mu.Unlock()
	return n, ok
}

func (s *shard) put(k cacheKey, fp, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.index == nil { // made on first use: a new Counter costs no 6 MB up front
		s.index = make(map[cacheKey]int32, s.size)
		s.slots = make([]slot, 0, s.size)
	}
	if i, ok := s.index[k]; ok { // counted concurrently, or another message with this id
		s.slots[i].fp, s.slots[i].n = fp, n
		return
	}
	if len(s.slots) < cap(s.slots) {
		s.index[k] = int32(len(s.slots))
		s.slots = append(s.slots, slot{key: k, fp: fp, n: n})
		return
	}
	for {
		sl := &s.slots[s.hand]
		if sl.ref {
			sl.ref = false
			s.hand = (s.hand + 1) % len(s.slots)
			continue
		}
		delete(s.index, sl.key)
		*sl = slot{key: k, fp: fp, n: n}
		s.index[k] = int32(s.hand)
		s.hand = (s.hand + 1) % len(s.slots)
		return
	}
}

// len returns the number of counts the cache holds.
func (c *Counter) len() int {
	n := 0
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		n += len(s.index)
		s.mu.Unlock()
	}
	return n
}
