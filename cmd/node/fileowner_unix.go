//go:build unix

package main

import (
	"os"
	"syscall"
)

// fileOwner is the owner and group of the file fi describes.
func fileOwner(fi os.FileInfo) (uid, gid int, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, false
	}
	return int(st.Uid), int(st.Gid), true
}
