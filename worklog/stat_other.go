//go:build !unix

package worklog

import "io/fs"

// fileIDOf reports false: without inode numbers a version of the file is
// known by its content only.
func fileIDOf(fi fs.FileInfo) (fileID, bool) { return fileID{}, false }
