//go:build unix

package space

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// Usage is the file system of dir: the bytes free to an unprivileged
// writer, and its size.
func Usage(dir string) (free, total uint64, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, 0, fmt.Errorf("free space of %s: %w", dir, err)
	}
	return uint64(st.Bavail) * uint64(st.Bsize), uint64(st.Blocks) * uint64(st.Bsize), nil
}
