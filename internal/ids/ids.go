// Package ids makes and checks the identifiers loom hands out.
//
// A new id is a prefix followed by 26 characters of Crockford base32: 48 bits
// of milliseconds since the Unix epoch and 80 random bits, as in ULID. Ids made
// later sort after ids made earlier (to the millisecond), which keeps listings
// in creation order and B-tree inserts near the right edge.
package ids

import (
	"math/rand/v2"
	"time"
)

const alphabet = "0123456789abcdefghjkmnpqrstvwxyz"

// New returns prefix followed by a fresh time-ordered random id.
func New(prefix string) string { return NewAt(prefix, time.Now()) }

// NewAt is New with the time part taken from t, for callers that have read
// the clock already (it is not free on every machine).
func NewAt(prefix string, t time.Time) string {
	var b [26]byte
	ms := uint64(t.UnixMilli())
	// 48 bits of time in 10 characters (50 bits, top two zero).
	for i := 9; i >= 0; i-- {
		b[i] = alphabet[ms&31]
		ms >>= 5
	}
	// 80 random bits in 16 characters.
	hi, lo := rand.Uint64(), rand.Uint64()
	for i := 25; i >= 10; i-- {
		b[i] = alphabet[lo&31]
		lo = lo>>5 | hi<<59
		hi >>= 5
	}
	return prefix + string(b[:])
}

// MaxLen is the longest id Valid accepts.
const MaxLen = 128

// Valid reports whether s is usable as an id of a thread, message or commit:
// 1 to MaxLen bytes of ASCII letters, digits, '_', '-' and '.', not starting
// with '.' or '-'. Such an id is safe as a file name on Linux, a URL path
// segment, a SQL value and a Redis key part: it cannot name a parent
// directory, hold a path separator or a Redis hash-tag brace. (On
// case-insensitive file systems "Th" and "th" name one file, and Windows
// reserves names such as "nul": a store that maps ids to file names there
// must encode them.)
func Valid(s string) bool {
	if len(s) == 0 || len(s) > MaxLen || s[0] == '.' || s[0] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '-', c == '.':
		default:
			return false
		}
	}
	return true
}

// MaxKeyLen is the longest key ValidKey accepts.
const MaxKeyLen = 2*MaxLen + 1

// Key returns the key under which a store keeps the thread id of tenant:
// the id itself for the default tenant "", and tenant + "/" + id for any
// other. Ids and tenants hold no '/', so every key has one reading, and
// the ids of two tenants can never meet in a store.
func Key(tenant, id string) string {
	if tenant == "" {
		return id
	}
	return tenant + "/" + id
}

// SplitKey is the inverse of Key: the tenant and id of a key.
func SplitKey(key string) (tenant, id string) {
	for i := 0; i < len(key); i++ {
		if key[i] == '/' {
			return key[:i], key[i+1:]
		}
	}
	return "", key
}

// ValidKey reports whether s is a key Key can make from a valid tenant and
// id: an id (Valid), or two of them joined by one '/'. Stores check thread
// ids with it; a key is safe wherever an id is, except that the '/' makes a
// subdirectory when the key names a file.
func ValidKey(s string) bool {
	tenant, id := SplitKey(s)
	return Valid(id) && (tenant == "" && len(s) == len(id) || Valid(tenant))
}
