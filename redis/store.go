package redis

import (
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/loomthreads/loom/internal/ids"
	"github.com/loomthreads/loom/internal/netstore"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/store"
)

func init() {
	open := func(ctx context.Context, u *url.URL) (store.Store, error) { return Open(ctx, u.String(), nil) }
	thread.Register("redis", open)
	thread.Register("rediss", open)
}

// SchemaVersion is the version of the key layout this package writes. Open
// migrates older data up to it and refuses data written by a newer one.
const SchemaVersion = 3

// Options configure a Store. A nil *Options, and every zero field, means
// the defaults; query parameters of the URL fill the fields left zero.
type Options struct {
	// Prefix starts every key the store writes; default "loom" (URL:
	// ?prefix=). Several stores can share one database under different
	// prefixes. It is 1 to 64 letters, digits, '_', '-' or '.'.
	Prefix string
	// TTL, when positive, makes every thread expire TTL after its last head
	// move (URL: ?ttl=24h). See the package doc for what expiry means for
	// shared commits.
	TTL time.Duration
	// SweepInterval is how often a background sweeper deletes expired
	// threads when TTL is set; default one minute, negative for never
	// (call Sweep yourself). URL: ?sweep=30s.
	SweepInterval time.Duration
	// Cluster refuses batches that span several thread families, as a Redis
	// Cluster must. It is set when Client is a *redis.ClusterClient or the
	// URL says ?cluster=true (which also dials a cluster client, with more
	// nodes in ?addr=host:port parameters).
	Cluster bool
	// ConnectTimeout bounds dialing Redis (URL: ?connect_timeout=5s, or
	// go-redis's dial_timeout); 0 means DefaultConnectTimeout.
	ConnectTimeout time.Duration
	// Timeout bounds each command, and each pipeline, the store sends,
	// retries included (URL: ?timeout=10s, or go-redis's read_timeout):
	// a Redis that does not answer in time fails the call with
	// thread.ErrUnavailable. 0 means DefaultTimeout; negative, no deadline
	// but the call's context. A write that timed out may or may not have
	// been applied: its answer was lost.
	Timeout time.Duration
	// Client, when not nil, is used instead of dialing the URL; Close then
	// leaves it open. The store does not change it: its own timeouts
	// apply (ConnectTimeout and Timeout are for the clients the store
	// dials), and its errors of an outage are mapped as a dialed one's.
	Client goredis.UniversalClient
	// Logger receives the sweeper's errors; nil means slog.Default().
	Logger *slog.Logger
}

// Store is a store.Store on Redis. It is safe for concurrent use, and
// several processes may share one Redis through their own Stores.
type Store struct {
	rdb      goredis.UniversalClient
	ownsConn bool
	prefix   string
	ttl      time.Duration
	cluster  bool
	timeout  time.Duration // of each command, for a client the store dialed
	log      *slog.Logger
	now      func() time.Time
	// hook, when not nil, is called by apply at "script" (before the
	// apply script runs) and "cleanup" (after it applied a batch), so
	// tests can run another writer in between.
	hook func(stage string)

	fams familyCache
	seen probeCache // what the apply script's guard last found or left

	watchMu sync.Mutex
	watches map[*goredis.PubSub]struct{} // nil once closed

	stop     chan struct{}
	sweeping sync.WaitGroup
	closing  sync.Once
}

var _ store.Store = (*Store)(nil)

// Open connects to the Redis that rawURL names,
// redis://[user:pass@]host:port/db?prefix=loom&ttl=24h, checks the schema
// version (migrating older data, refusing newer) and returns the store.
// opts may be nil. With opts.Client set, rawURL may be "" or carry only
// the query parameters.
func Open(ctx context.Context, rawURL string, opts *Options) (*Store, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	conn, dialCluster, err := parseURL(rawURL, &o)
	if err != nil {
		return nil, err
	}
	if o.Prefix == "" {
		o.Prefix = "loom"
	}
	if len(o.Prefix) > 64 || !ids.Valid(o.Prefix) {
		return nil, fmt.Errorf("redis store: prefix %q: want 1 to 64 letters, digits, '_', '-' or '.': %w", o.Prefix, thread.ErrInvalid)
	}
	s := &Store{prefix: o.Prefix, ttl: max(o.TTL, 0), cluster: o.Cluster, log: o.Logger, now: time.Now, stop: make(chan struct{}),
		watches: map[*goredis.PubSub]struct{}{}}
	if s.log == nil {
		s.log = slog.Default()
	}
	switch {
	case o.Client != nil:
		s.rdb = o.Client
	case dialCluster:
		co, err := goredis.ParseClusterURL(conn)
		if err != nil {
			return nil, fmt.Errorf("redis store url: %v: %w", err, thread.ErrInvalid)
		}
		hook := o.deadlines(&co.DialTimeout, &co.ReadTimeout, &co.WriteTimeout)
		co.ContextTimeoutEnabled = true
		c := goredis.NewClusterClient(co)
		c.AddHook(hook)
		s.timeout = hook.timeout
		s.rdb, s.ownsConn = c, true
	default:
		ro, err := goredis.ParseURL(conn)
		if err != nil {
			return nil, fmt.Errorf("redis store url: %v: %w", err, thread.ErrInvalid)
		}
		hook := o.deadlines(&ro.DialTimeout, &ro.ReadTimeout, &ro.WriteTimeout)
		ro.ContextTimeoutEnabled = true
		c := goredis.NewClient(ro)
		c.AddHook(hook)
		s.timeout = hook.timeout
		s.rdb, s.ownsConn = c, true
	}
	if _, ok := s.rdb.(*goredis.ClusterClient); ok {
		s.cluster = true
	}
	if err := s.migrate(ctx); err != nil {
		s.closeConn()
		return nil, mapError(ctx, err)
	}
	if s.ttl > 0 && o.SweepInterval >= 0 {
		every := o.SweepInterval
		if every == 0 {
			every = time.Minute
		}
		s.sweeping.Go(func() { s.sweepLoop(every) })
	}
	return s, nil
}

// deadlines sets the timeouts of a client the store dials from o, the
// URL's go-redis parameters and the defaults, in that order, and returns
// the hook that bounds each command.
func (o *Options) deadlines(dial, read, write *time.Duration) deadlines {
	switch {
	case o.ConnectTimeout > 0:
		*dial = o.ConnectTimeout
	case *dial == 0:
		*dial = DefaultConnectTimeout
	}
	timeout := o.Timeout
	switch {
	case timeout == 0 && *read != 0:
		timeout = *read // go-redis's read_timeout; negative: none
	case timeout == 0:
		timeout = DefaultTimeout
	}
	if timeout < 0 {
		if *read == 0 {
			*read = -1
		}
		if *write == 0 {
			*write = -1
		}
		return deadlines{}
	}
	*read, *write = timeout, timeout
	return deadlines{timeout: timeout}
}

// parseURL takes the store's own query parameters out of rawURL into the
// zero fields of o and returns the URL left for the driver.
func parseURL(rawURL string, o *Options) (conn string, cluster bool, err error) {
	if rawURL == "" {
		if o.Client == nil {
			return "", false, fmt.Errorf("redis store: no URL and no client: %w", thread.ErrInvalid)
		}
		return "", false, nil
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", false, fmt.Errorf("redis store url: %v: %w", err, thread.ErrInvalid)
	}
	bad := func(name, v string, err error) error {
		return fmt.Errorf("redis store url: %s=%q: %v: %w", name, v, err, thread.ErrInvalid)
	}
	q := u.Query()
	if v := q.Get("prefix"); v != "" && o.Prefix == "" {
		o.Prefix = v
	}
	if v := q.Get("ttl"); v != "" && o.TTL == 0 {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return "", false, bad("ttl", v, errors.Join(err, errors.New("want a positive duration")))
		}
		o.TTL = d
	}
	if v := q.Get("sweep"); v != "" && o.SweepInterval == 0 {
		d, err := time.ParseDuration(v)
		if err != nil {
			return "", false, bad("sweep", v, err)
		}
		o.SweepInterval = d
	}
	if err := netstore.TakeTimeouts(q, &o.ConnectTimeout, &o.Timeout); err != nil {
		return "", false, fmt.Errorf("redis store url: %v: %w", err, thread.ErrInvalid)
	}
	if v := q.Get("cluster"); v != "" {
		if cluster, err = strconv.ParseBool(v); err != nil {
			return "", false, bad("cluster", v, err)
		}
		o.Cluster = o.Cluster || cluster
	}
	for _, k := range []string{"prefix", "ttl", "sweep", "cluster"} {
		q.Del(k)
	}
	u.RawQuery = q.Encode()
	return u.String(), cluster, nil
}

// Close stops the sweeper, ends every Watch and closes the connection
// (unless it came in Options.Client).
func (s *Store) Close() error {
	var err error
	s.closing.Do(func() {
		close(s.stop)
		s.closeWatches()
		s.sweeping.Wait()
		err = s.closeConn()
	})
	return err
}

func (s *Store) closeConn() error {
	if s.ownsConn {
		return s.rdb.Close()
	}
	return nil
}

// Client returns the Redis client the store uses.
func (s *Store) Client() goredis.UniversalClient { return s.rdb }

// Prefix returns the prefix of every key of the store.
func (s *Store) Prefix() string { return s.prefix }

// --- keys ---
//
// Every commit id that reaches a key has passed ids.Valid (letters,
// digits, '_', '-', '.') and every thread id ids.ValidKey (such ids, or
// tenant/id), so no key part can hold a brace, a colon or a separator:
// none can leave the prefix or make a hash tag of its own. A family is
// named after a thread id or key, so its hash tag {F} is the first in
// every key of the family. Tenants of the listings are hex-encoded unless
// they pass ids.Valid too.

func (s *Store) schemaKey() string              { return s.prefix + ":schema" }
func (s *Store) threadIndexKey(t string) string { return s.prefix + ":t:" + t }
func (s *Store) commitIndexKey(c string) string { return s.prefix + ":c:" + c }
func (s *Store) allKey() string                 { return s.prefix + ":a" }
func (s *Store) expiryKey() string              { return s.prefix + ":x" }
func (s *Store) tenantKey(tenant string) string {
	if tenant == "" || (len(tenant) <= 64 && ids.Valid(tenant)) {
		return s.prefix + ":l:=" + tenant
	}
	// Free text: a digest. Tenants that share one (never, in practice)
	// share a sorted set, and listing filters by tenant anyway.
	sum := sha256.Sum256([]byte(tenant))
	return s.prefix + ":l:~" + hex.EncodeToString(sum[:16])
}

// forkKey is the sorted set of the threads forked from parent (a thread
// key), and labelKey that of a tenant's threads labelled k=v: named by
// the SHA-1 of the parent, or of tenant, k and v joined by NULs, which
// the apply script makes the same way (redis.sha1hex). Ids in them are
// candidates: readers check each record.
func (s *Store) forkKey(parent string) string {
	sum := sha1.Sum([]byte(parent))
	return s.prefix + ":f:" + hex.EncodeToString(sum[:])
}

func (s *Store) labelKey(tenant, k, v string) string {
	sum := sha1.Sum([]byte(tenant + "\x00" + k + "\x00" + v))
	return s.prefix + ":b:" + hex.EncodeToString(sum[:])
}

// famKey is the key of a family-wide hash ("c", "m", "n") or, with a
// thread, of one thread's hash ("r", "h", "k").
func (s *Store) famKey(fam, kind string) string { return s.prefix + ":{" + fam + "}:" + kind }
func (s *Store) recKey(fam, t string) string    { return s.famKey(fam, "r:"+t) }
func (s *Store) histKey(fam, t string) string   { return s.famKey(fam, "h:"+t) }
func (s *Store) cpKey(fam, t string) string     { return s.famKey(fam, "k:"+t) }

// --- the family cache ---

// familyCache remembers which family a thread or commit is in. An entry
// never goes stale while its object exists (families never change); after
// a delete and a re-creation elsewhere a lookup misses, and the caller
// reads the index again.
type familyCache struct {
	mu sync.Mutex
	m  map[string]string
}

const familyCacheSize = 1 << 16

func (c *familyCache) get(key string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f, ok := c.m[key]
	return f, ok
}

func (c *familyCache) put(key, fam string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= familyCacheSize {
		c.m = make(map[string]string)
	}
	c.m[key] = fam
}

func (c *familyCache) drop(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, key)
}

// family returns the family of the thread ("t:"+id) or commit ("c:"+id)
// named by key, from the cache unless fresh, else from its index key; ""
// when there is none.
func (s *Store) family(ctx context.Context, key string, fresh bool) (fam string, cached bool, err error) {
	if !fresh {
		if f, ok := s.fams.get(key); ok {
			return f, true, nil
		}
	}
	f, err := s.rdb.Get(ctx, s.indexKey(key)).Result()
	if errors.Is(err, goredis.Nil) {
		s.fams.drop(key)
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	s.fams.put(key, f)
	return f, false, nil
}

func (s *Store) indexKey(key string) string {
	if key[0] == 't' {
		return s.threadIndexKey(key[2:])
	}
	return s.commitIndexKey(key[2:])
}
