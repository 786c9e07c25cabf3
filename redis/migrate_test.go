package redis_test

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/loomthreads/loom/internal/migratetest"
	"github.com/loomthreads/loom/internal/testserver"
	"github.com/loomthreads/loom/internal/testwait"
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

// A migration cut short is finished by the next Open: alice's secret
// half moved (its mark written and its record renamed; its history,
// checkpoints and index key not yet, which the move script now renames
// together, but an earlier build of it did not), and bob's bobs moved in
// its family (the move script's work) but not yet in the listings or its
// index key.
func TestMigrateReleaseAfterACrash(t *testing.T) {
	url, rdb := restoreFixture(t)
	ctx := t.Context()
	famKey := func(thread, kind string) string {
		t.Helper()
		fam, err := rdb.Get(ctx, "loom:t:"+thread).Result()
		if err != nil {
			t.Fatal(err)
		}
		return "loom:{" + fam + "}:" + kind
	}
	for _, err := range []error{
		rdb.Set(ctx, famKey("secret", "mv:secret"), "alice/secret", 0).Err(),
		rdb.HSet(ctx, famKey("secret", "r:secret"), "i", "alice/secret").Err(),
		rdb.Rename(ctx, famKey("secret", "r:secret"), famKey("secret", "r:alice/secret")).Err(),
		rdb.Set(ctx, famKey("bobs", "mv:bobs"), "bob/bobs", 0).Err(),
		rdb.HSet(ctx, famKey("bobs", "r:bobs"), "i", "bob/bobs").Err(),
		rdb.Rename(ctx, famKey("bobs", "r:bobs"), famKey("bobs", "r:bob/bobs")).Err(),
		rdb.Rename(ctx, famKey("bobs", "h:bobs"), famKey("bobs", "h:bob/bobs")).Err(),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	s := open(t, url, nil)
	migratetest.Check(t, s, migratetest.Options{Sessions: true})
	if keys, err := rdb.Keys(ctx, "loom:{*}:mv:*").Result(); err != nil || len(keys) != 0 {
		t.Errorf("marks left: %v, %v", keys, err)
	}
}

// pipeHook is a go-redis hook that calls itself before each pipeline its
// client sends (the migration reads a thread's record and deletes the
// session keys in pipelines); an error fails the pipeline.
type pipeHook func(ctx context.Context, cmds []goredis.Cmder) error

func (h pipeHook) DialHook(next goredis.DialHook) goredis.DialHook          { return next }
func (h pipeHook) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook { return next }
func (h pipeHook) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		if err := h(ctx, cmds); err != nil {
			return err
		}
		return next(ctx, cmds)
	}
}

// hooked returns a client of url with hook.
func hooked(t *testing.T, url string, hook pipeHook) *goredis.Client {
	t.Helper()
	opt, err := goredis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	c := goredis.NewClient(opt)
	c.AddHook(hook)
	t.Cleanup(func() { c.Close() })
	return c
}

// readsRecord reports whether a pipeline is the migration's read of a
// thread's record.
func readsRecord(cmds []goredis.Cmder) bool {
	for _, c := range cmds {
		if c.Name() == "hmget" {
			return true
		}
	}
	return false
}

// A migration that outlasts the lock's expiry, each of its steps too,
// renews the lock: a process that opens the store meanwhile waits, moves
// nothing, and then finds everything.
func TestMigrateLockRenewed(t *testing.T) {
	defer redis.SetMigrationLockTTL(300 * time.Millisecond)()
	url, rdb := restoreFixture(t)
	ctx := t.Context()
	var slowReads, otherReads atomic.Int32
	slow := hooked(t, url, func(_ context.Context, cmds []goredis.Cmder) error {
		if readsRecord(cmds) {
			slowReads.Add(1)
			// Deliberate: each step outlasts the lock's 300ms expiry.
			time.Sleep(400 * time.Millisecond)
		}
		return nil
	})
	first := make(chan error, 1)
	go func() {
		s, err := redis.Open(ctx, "", &redis.Options{Client: slow})
		if err == nil {
			s.Close()
		}
		first <- err
	}()
	testwait.Until(t, 10*time.Second, "the first process takes the migration lock", func() bool {
		return rdb.Exists(ctx, "loom:migrating").Val() != 0
	})
	other := hooked(t, url, func(_ context.Context, cmds []goredis.Cmder) error {
		if readsRecord(cmds) {
			otherReads.Add(1)
		}
		return nil
	})
	s := open(t, "", &redis.Options{Client: other})
	if err := <-first; err != nil {
		t.Fatalf("first open: %v", err)
	}
	if n := slowReads.Load(); n < 3 {
		t.Fatalf("the first process moved %d threads; want a migration several times the lock's TTL", n)
	}
	if n := otherReads.Load(); n != 0 {
		t.Errorf("the second process read %d records to move while the first held the lock", n)
	}
	migratetest.Check(t, s, migratetest.Options{Sessions: true})
}

// A migrator that finds the lock taken from it (it stalled past the
// expiry, and another process took over) stops before its next step, and
// the next Open finishes the migration.
func TestMigrateLockLost(t *testing.T) {
	defer redis.SetMigrationLockTTL(300 * time.Millisecond)()
	url, rdb := restoreFixture(t)
	ctx := t.Context()
	var reads atomic.Int32
	thief := hooked(t, url, func(ctx context.Context, cmds []goredis.Cmder) error {
		if readsRecord(cmds) && reads.Add(1) == 2 {
			return rdb.Set(ctx, "loom:migrating", "another process", 300*time.Millisecond).Err()
		}
		return nil
	})
	_, err := redis.Open(ctx, "", &redis.Options{Client: thief})
	if err == nil || !strings.Contains(err.Error(), "lock was lost") {
		t.Fatalf("open after losing the migration lock: %v", err)
	}
	if n := reads.Load(); n != 2 {
		t.Errorf("%d records read to move; want the migrator to stop after the move it was in", n)
	}
	if v, err := rdb.Get(ctx, "loom:schema").Int(); err != nil || v != 1 {
		t.Errorf("schema %d (%v) after a migration cut short, want 1", v, err)
	}
	s := open(t, url, nil)
	migratetest.Check(t, s, migratetest.Options{Sessions: true})
}

// A migration cut short after the session threads were made, before the
// session keys went, leaves the schema version alone; the next Open
// deletes the keys and makes no second thread.
func TestMigrateSessionsCutShort(t *testing.T) {
	url, rdb := restoreFixture(t)
	ctx := t.Context()
	errCut := errors.New("cut short")
	cut := hooked(t, url, func(_ context.Context, cmds []goredis.Cmder) error {
		for _, c := range cmds {
			if c.Name() == "del" && strings.HasPrefix(c.Args()[1].(string), "loom:s:") {
				return errCut
			}
		}
		return nil
	})
	if _, err := redis.Open(ctx, "", &redis.Options{Client: cut}); !errors.Is(err, errCut) {
		t.Fatalf("open cut short: %v", err)
	}
	if v, err := rdb.Get(ctx, "loom:schema").Int(); err != nil || v != 1 {
		t.Errorf("schema %d (%v) after a migration cut short, want 1", v, err)
	}
	if keys, err := rdb.Keys(ctx, "loom:s:*").Result(); err != nil || len(keys) == 0 {
		t.Fatalf("session keys %v, %v: want them kept", keys, err)
	}
	s := open(t, url, nil)
	if keys, err := rdb.Keys(ctx, "loom:s:*").Result(); err != nil || len(keys) != 0 {
		t.Errorf("session keys left: %v, %v", keys, err)
	}
	all, err := rdb.ZRange(ctx, "loom:a", 0, -1).Result()
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
	migratetest.Check(t, s, migratetest.Options{Sessions: true})
}
