package sqlite

import "fmt"

// Space freed by retention (issue 29). SQLite keeps the pages of deleted
// rows in the file, on its freelist, for later writes: a GC that drops
// most of a store would leave the file as large as before. A file this
// package makes has auto_vacuum=INCREMENTAL (set on the write connection
// before the schema's first table), and a write transaction that freed
// commits ends, when the free pages are at least vacuumMinPages and a
// quarter of the file, with PRAGMA incremental_vacuum: the pages in use at
// the end of the file move into the free ones and the file is cut, in that
// same transaction (the cut reaches the file at the next checkpoint of
// the write-ahead log). An appending store frees nothing and never pays
// for the look.
//
// A file made before this had auto_vacuum off, which only a VACUUM can
// change: there incremental_vacuum does nothing, the free pages are reused
// by later writes, and the file shrinks after `PRAGMA
// auto_vacuum=INCREMENTAL; VACUUM;` run once (it rewrites the file, and
// needs loom stopped and as much free disk as the file).
//
// The floor is low: GC drops a long history in batches (thread.DB.GC), and
// a floor of megabytes left the last batch's pages in the file, which for
// a store that keeps little is most of it (2.65× the kept bytes, against
// 1.48× with this one, in BenchmarkGC100k/regenerated).
const vacuumMinPages = 64 // 256 KiB of 4 KiB pages

// vacuumFreed runs incremental_vacuum in the open write transaction if the
// free pages warrant it.
func (a *applier) vacuumFreed() error {
	var free, pages int64
	if _, err := a.scan(a.st.freelistCount, nil, &free); err != nil {
		return fmt.Errorf("free pages: %w", err)
	}
	if free < vacuumMinPages {
		return nil
	}
	if _, err := a.scan(a.st.pageCount, nil, &pages); err != nil {
		return fmt.Errorf("pages: %w", err)
	}
	if free*4 < pages {
		return nil
	}
	if _, err := a.exec(a.st.incrementalVacuum); err != nil {
		return fmt.Errorf("incremental vacuum: %w", err)
	}
	return nil
}
