package redis_test

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/loomthreads/loom/internal/migratetest"
	"github.com/loomthreads/loom/internal/testserver"
	"github.com/loomthreads/loom/redis"
)

// releaseFixture holds every key that the release before tenants had
// namespaces (schema 1, with the work log's session keys) wrote, made by
// internal/migratetest/testdata/genfixture.go.txt: one JSON line per key
// with its DUMP, restored here with RESTORE, byte for byte.
const releaseFixture = "testdata/release-26c53b2.jsonl"

// restoreFixture returns the URL of a fresh Redis database holding the
// fixture, and a client on it.
func restoreFixture(t *testing.T) (string, *goredis.Client) {
	t.Helper()
	url := testserver.Redis(t)
	opt, err := goredis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	rdb := goredis.NewClient(opt)
	t.Cleanup(func() { rdb.Close() })
	f, err := os.Open(releaseFixture)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var k struct {
			Key  string `json:"key"`
			PTTL int64  `json:"pttl_ms"`
			Dump string `json:"dump"`
		}
		if err := json.Unmarshal(sc.Bytes(), &k); err != nil {
			t.Fatal(err)
		}
		dump, err := base64.StdEncoding.DecodeString(k.Dump)
		if err != nil {
			t.Fatal(err)
		}
		if err := rdb.Restore(t.Context(), k.Key, time.Duration(k.PTTL)*time.Millisecond, string(dump)).Err(); err != nil {
			t.Fatalf("restore %s: %v", k.Key, err)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return url, rdb
}

// TestMigrateRelease opens the release's data: every thread, version,
// checkpoint, fork, state, work item and session record is there, each
// tenant's threads in its own namespace, and the session keys are gone.
func TestMigrateRelease(t *testing.T) {
	url, rdb := restoreFixture(t)
	s := open(t, url, nil)
	migratetest.Check(t, s, migratetest.Options{Sessions: true})
	if keys, err := rdb.Keys(t.Context(), "loom:s:*").Result(); err != nil || len(keys) != 0 {
		t.Errorf("session keys left: %v, %v", keys, err)
	}
	for _, k := range []string{"loom:t:bobs", "loom:t:long", "loom:migrating"} {
		if n, err := rdb.Exists(t.Context(), k).Result(); err != nil || n != 0 {
			t.Errorf("%s is still there (%v)", k, err)
		}
	}
	if v, err := rdb.Get(t.Context(), "loom:schema").Int(); err != nil || v != redis.SchemaVersion {
		t.Errorf("schema %d, %v", v, err)
	}
}

// TestMigrateReleaseAtOnce: processes opening the old data at once
// migrate it once, and each reads it whole.
func TestMigrateReleaseAtOnce(t *testing.T) {
	url, rdb := restoreFixture(t)
	var wg sync.WaitGroup
	stores := make([]*redis.Store, 3)
	errs := make([]error, len(stores))
	for i := range stores {
		wg.Go(func() { stores[i], errs[i] = redis.Open(t.Context(), url, nil) })
	}
	wg.Wait()
	for i, s := range stores {
		if errs[i] != nil {
			t.Fatalf("open %d: %v", i, errs[i])
		}
		defer s.Close()
	}
	all, err := rdb.ZRange(t.Context(), "loom:a", 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, id := range all {
		if strings.Contains(id, "wls_") {
			n++
		}
	}
	if n != 2 {
		t.Errorf("%d session threads in %v, want 2", n, all)
	}
	migratetest.Check(t, stores[2], migratetest.Options{Sessions: true})
}

// A migration cut short — alice's secret half moved (its record renamed,
// its index key not yet) — is finished by the next Open.
func TestMigrateReleaseAfterACrash(t *testing.T) {
	url, rdb := restoreFixture(t)
	ctx := t.Context()
	fam, err := rdb.Get(ctx, "loom:t:secret").Result()
	if err != nil {
		t.Fatal(err)
	}
	// What moveToKey does first: mark, then the record's fields and name.
	for _, err := range []error{
		rdb.Set(ctx, "loom:{"+fam+"}:mv:secret", "alice/secret", 0).Err(),
		rdb.HSet(ctx, "loom:{"+fam+"}:r:secret", "i", "alice/secret").Err(),
		rdb.Rename(ctx, "loom:{"+fam+"}:r:secret", "loom:{"+fam+"}:r:alice/secret").Err(),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	s := open(t, url, nil)
	migratetest.Check(t, s, migratetest.Options{Sessions: true})
}
