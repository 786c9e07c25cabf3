//go:build unix

package worklog

import (
	"io/fs"
	"syscall"
)

// fileIDOf returns what identifies a version of a file: its device and
// inode (every write here renames a new file into place), size and
// modification time (for writers that rewrite it in place).
func fileIDOf(fi fs.FileInfo) (fileID, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileID{}, false
	}
	return fileID{
		exists: true,
		dev:    uint64(st.Dev),
		ino:    uint64(st.Ino),
		size:   st.Size,
		mtime:  fi.ModTime().UnixNano(),
	}, true
}
