package space

import (
	"fmt"

	"golang.org/x/sys/windows"
)

// Usage is the file system of dir: the bytes free to the calling user
// (its quota counted), and its size.
func Usage(dir string) (free, total uint64, err error) {
	p, err := windows.UTF16PtrFromString(dir)
	if err != nil {
		return 0, 0, fmt.Errorf("free space of %s: %w", dir, err)
	}
	if err := windows.GetDiskFreeSpaceEx(p, &free, &total, nil); err != nil {
		return 0, 0, fmt.Errorf("free space of %s: %w", dir, err)
	}
	return free, total, nil
}
