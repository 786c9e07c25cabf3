package jsonfile

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// consistent checks the store's bookkeeping against its files, for tests:
// every commit's refs file counts its children, history entries and
// checkpoints, never 0 (a commit nothing reaches is freed); every commit
// file has a refs file and every refs file a commit; every history entry
// and checkpoint names a stored commit; each thread's history is its
// versions First to Version, in its chunks and file; and no chunk below
// the one of First is left. It reads every file: for small test data.
func consistent(s *Store) error {
	if err := s.settle(context.Background()); err != nil {
		return err
	}
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	names := func(dir string) []string {
		d, err := s.root.Open(dir)
		if err != nil {
			bad("%s: %v", dir, err)
			return nil
		}
		defer d.Close()
		n, err := d.Readdirnames(-1)
		if err != nil {
			bad("%s: %v", dir, err)
		}
		return n
	}
	counts := map[string]int64{}
	for _, n := range names("refs") {
		if strings.HasPrefix(n, ".") {
			continue
		}
		b, err := s.root.ReadFile(refsPath(n))
		if err != nil {
			return err
		}
		c, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil {
			bad("refs of %s: %q", n, b)
		}
		counts[n] = c
	}
	want := map[string]int64{}
	stored := map[string]bool{}
	for _, n := range names("commits") {
		id, ok := strings.CutSuffix(n, ".json")
		if !ok || strings.HasPrefix(n, ".") {
			continue
		}
		stored[id] = true
		c, err := s.readCommit(id)
		if err != nil {
			return err
		}
		if c.Parent != "" {
			want[c.Parent]++
		}
	}
	for _, n := range names("threads") {
		name, ok := strings.CutSuffix(n, ".json")
		if !ok || strings.HasPrefix(n, ".") {
			continue
		}
		key := keyOfName(name)
		f, err := s.readThread(key)
		if err != nil {
			return err
		}
		for _, cp := range f.Checkpoints {
			want[cp.Commit]++
		}
		v := f.first()
		for chunk := range f.Sealed {
			entries, err := s.readChunk(key, chunk)
			if chunk < (v-1)/historyChunk {
				if err == nil {
					bad("thread %s: chunk %d is below its first version %d and left", key, chunk, v)
				}
				continue
			}
			if err != nil {
				bad("thread %s: %v", key, err)
				continue
			}
			for _, e := range entries {
				if e.Version < v {
					continue
				}
				if e.Version != v {
					bad("thread %s: chunk %d has version %d, want %d", key, chunk, e.Version, v)
				}
				if e.Commit != "" {
					want[e.Commit]++
				}
				v++
			}
		}
		for _, e := range f.History {
			if e.Version != v {
				bad("thread %s: its file has version %d, want %d", key, e.Version, v)
			}
			if e.Commit != "" {
				want[e.Commit]++
			}
			v++
		}
		if v != f.Version+1 {
			bad("thread %s: history ends at version %d, its version is %d", key, v-1, f.Version)
		}
	}
	for id, n := range want {
		if !stored[id] {
			bad("commit %s has %d references and is not stored", id, n)
		}
	}
	for id := range stored {
		n, ok := counts[id]
		switch {
		case !ok:
			bad("commit %s has no refs file", id)
		case n != want[id]:
			bad("commit %s counts %d references; %d are there", id, n, want[id])
		case n <= 0:
			bad("commit %s is kept with no reference", id)
		}
	}
	for id := range counts {
		if !stored[id] {
			bad("refs file of commit %s, which is not stored", id)
		}
	}
	return errors.Join(errs...)
}
