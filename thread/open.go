package thread

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"

	"github.com/loomthreads/loom/thread/store"
)

// OpenFunc opens a store from its URL. Backends register one per scheme.
type OpenFunc func(ctx context.Context, u *url.URL) (store.Store, error)

var (
	registryMu sync.RWMutex
	registry   = make(map[string]OpenFunc)
)

// Register makes a store backend available to Open under a URL scheme. It is
// meant to be called from a backend package's init; registering a scheme
// twice panics, as database/sql does.
func Register(scheme string, open OpenFunc) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if _, dup := registry[scheme]; dup {
		panic("thread: Register called twice for scheme " + scheme)
	}
	registry[scheme] = open
}

// Schemes returns the registered URL schemes, sorted.
func Schemes() []string {
	registryMu.RLock()
	defer registryMu.RUnlock()
	var out []string
	for s := range registry {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// OpenStore opens the store that rawURL names, such as "memory://". The
// backend's package must be imported (for its init) for its scheme to be
// known.
func OpenStore(ctx context.Context, rawURL string) (store.Store, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("store url: %v: %w", err, ErrInvalid)
	}
	registryMu.RLock()
	open := registry[u.Scheme]
	registryMu.RUnlock()
	if open == nil {
		// A program that uses package thread knows its stores by the
		// packages it imports (see Register); the person who typed the URL
		// needs the schemes there are.
		return nil, fmt.Errorf("store url %q: no store has the scheme %q; the schemes are %s: %w",
			u.Redacted(), u.Scheme, strings.Join(Schemes(), ", "), ErrUnsupported)
	}
	return open(ctx, u)
}

// Open opens the store that rawURL names and returns a DB on it; opts may be
// nil for the defaults.
func Open(ctx context.Context, rawURL string, opts *Options) (*DB, error) {
	s, err := OpenStore(ctx, rawURL)
	if err != nil {
		return nil, err
	}
	return New(s, opts), nil
}
