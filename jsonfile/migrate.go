package jsonfile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"

	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/store"
)

// rekeyChunks makes the sealed history chunks of a thread (already in its
// key's directory) name the thread by its key, as reads check.
func rekeyChunks(s *Store, key string, sealed int64) error {
	for n := int64(0); n < sealed; n++ {
		b, err := s.root.ReadFile(chunkPath(key, n))
		if err != nil {
			return fmt.Errorf("history of %s: %w", key, err)
		}
		var c chunkFile
		if err := json.Unmarshal(b, &c); err != nil {
			return fmt.Errorf("history of %s: corrupt chunk %d: %v", key, n, err)
		}
		if c.Thread == key {
			continue
		}
		c.Thread = key
		data, err := encode(&c)
		if err != nil {
			return err
		}
		if err := s.writeFile(chunkPath(key, n), data); err != nil {
			return err
		}
	}
	if sealed > 0 {
		return s.syncDir(chunkDir(key))
	}
	return nil
}

// migrateTenantKeys moves every thread of a tenant other than the default
// from its id to its key (thread.Key): the file's id and forked_from
// become keys, the file moves to its key's name, and so does its history
// directory, whose chunks name it by its key. The history moves first and
// each thread is written under its new name before the old one goes, so a
// crash midway leaves a store that the next Open (which runs this again,
// the schema not yet bumped) finishes: a thread whose old file is still
// there is written again, the same; a history directory already moved is
// left. It reports each thread file it has looked at, the default
// tenant's that stay too (store.ReportMigration). The lock is held.
func migrateTenantKeys(ctx context.Context, s *Store) error {
	d, err := s.root.Open("threads")
	if err != nil {
		return err
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return err
	}
	names = slices.DeleteFunc(names, func(n string) bool {
		id, ok := strings.CutSuffix(n, ".json")
		return !ok || strings.HasPrefix(n, ".") || strings.Contains(id, "~")
	})
	p := thread.MigrationProgress{Store: "jsonfile", Step: "tenant keys", Total: len(names)}
	moved := false
	for _, n := range names {
		m, err := moveTenantKey(s, n)
		if err != nil {
			return err
		}
		moved = moved || m
		p.Done++
		store.ReportMigration(ctx, p)
	}
	if !moved {
		return nil
	}
	return errors.Join(s.syncDir("threads"), s.syncDir("history"))
}

// moveTenantKey moves the thread of the file threads/name to its key if it
// is a tenant's other than the default, as migrateTenantKeys describes, and
// reports whether it did.
func moveTenantKey(s *Store, name string) (bool, error) {
	id, _ := strings.CutSuffix(name, ".json")
	b, err := s.root.ReadFile("threads/" + name)
	if err != nil {
		return false, err
	}
	var f threadFile
	if err := json.Unmarshal(b, &f); err != nil {
		return false, fmt.Errorf("thread %q: corrupt file: %v", id, err)
	}
	if f.Tenant == "" {
		return false, nil // the default tenant's thread keeps its id
	}
	key := f.Tenant + "/" + f.ID
	if f.ID != id || !s.storableKey(key) {
		return false, fmt.Errorf("thread file %s holds thread %q of tenant %q", name, f.ID, f.Tenant)
	}
	f.ID = key
	if f.ForkedFrom.Thread != "" && !strings.Contains(f.ForkedFrom.Thread, "/") {
		f.ForkedFrom.Thread = f.Tenant + "/" + f.ForkedFrom.Thread
	}
	if _, err := s.root.Lstat(chunkDir(id)); err == nil {
		if err := s.root.Rename(chunkDir(id), chunkDir(key)); err != nil {
			return false, fmt.Errorf("move the history of %s: %w", key, err)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return false, err
	}
	if err := rekeyChunks(s, key, f.Sealed); err != nil {
		return false, err
	}
	data, err := encode(&f)
	if err != nil {
		return false, err
	}
	if err := s.writeFile(threadPath(key), data); err != nil {
		return false, err
	}
	if err := s.syncDir("threads"); err != nil {
		return false, err
	}
	if err := s.root.Remove("threads/" + name); err != nil {
		return false, err
	}
	return true, nil
}
