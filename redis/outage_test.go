package redis_test

import (
	"errors"
	"net/url"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/loomthreads/loom/internal/faultproxy"
	"github.com/loomthreads/loom/internal/testserver"
	"github.com/loomthreads/loom/redis"
	"github.com/loomthreads/loom/thread"
)

// TestOutages: with Redis black-holed, down or reset in flight, every read
// and write fails with thread.ErrUnavailable by the store's deadline (the
// URL's connect_timeout and timeout), with Redis named and no address, and
// once the network heals the same Store serves again and has lost nothing
// it acknowledged.
func TestOutages(t *testing.T) {
	const deadline = 500 * time.Millisecond
	p, storeURL := faultproxy.StartStore(t, testserver.Redis(t), deadline)
	faultproxy.Outages(t, open(t, storeURL, nil), p, "Redis", 20*deadline)
}

// TestOutagesOwnClient: a store given its own client (Options.Client),
// whose deadlines are the client's, maps an outage as a store that dials
// its client does: thread.ErrUnavailable naming Redis, not the driver's
// error (which a client would be answered 500 internal for).
func TestOutagesOwnClient(t *testing.T) {
	const deadline = 500 * time.Millisecond
	u, err := url.Parse(testserver.Redis(t))
	if err != nil {
		t.Fatal(err)
	}
	p := faultproxy.Start(t, u.Host)
	u.Host = p.Addr()
	ro, err := goredis.ParseURL(u.String())
	if err != nil {
		t.Fatal(err)
	}
	ro.DialTimeout, ro.ReadTimeout, ro.WriteTimeout = deadline, deadline, deadline
	c := goredis.NewClient(ro)
	t.Cleanup(func() { c.Close() })
	faultproxy.Outages(t, open(t, "", &redis.Options{Client: c}), p, "Redis", 20*deadline)
}

// TestDeadlineURL: the store's deadlines come from Options, else the URL
// (Go durations or whole seconds), else go-redis's own parameters, else
// the defaults; 0 in the URL means no deadline, and a bad value is
// refused with ErrInvalid.
func TestDeadlineURL(t *testing.T) {
	base := testserver.Redis(t)
	for _, tc := range []struct {
		query                      string
		opts                       *redis.Options
		dial, read, write, command time.Duration
	}{
		{"", nil, redis.DefaultConnectTimeout, redis.DefaultTimeout, redis.DefaultTimeout, redis.DefaultTimeout},
		{"?connect_timeout=2&timeout=500ms", nil, 2 * time.Second, 500 * time.Millisecond, 500 * time.Millisecond, 500 * time.Millisecond},
		{"?timeout=2s", &redis.Options{Timeout: time.Second}, redis.DefaultConnectTimeout, time.Second, time.Second, time.Second},
		{"?read_timeout=3s&dial_timeout=1s", nil, time.Second, 3 * time.Second, 3 * time.Second, 3 * time.Second},
		{"?timeout=0", nil, redis.DefaultConnectTimeout, 0, 0, 0}, // go-redis keeps "none" as 0
	} {
		s := open(t, base+tc.query, tc.opts)
		dial, read, write, command := redis.Timeouts(s)
		if dial != tc.dial || read != tc.read || write != tc.write || command != tc.command {
			t.Errorf("%q: dial %v read %v write %v command %v, want %v %v %v %v", tc.query, dial, read, write, command, tc.dial, tc.read, tc.write, tc.command)
		}
	}
	for _, q := range []string{"?timeout=soon", "?connect_timeout=-1s"} {
		if _, err := redis.Open(t.Context(), base+q, nil); !errors.Is(err, thread.ErrInvalid) {
			t.Errorf("%q: %v, want ErrInvalid", q, err)
		}
	}
}
