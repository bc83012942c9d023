// Package spacetest gives tests a small file system of their own to fill:
// a tmpfs mounted for the test (mounting needs root, which CI has).
package spacetest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

// Tmpfs mounts a tmpfs of size bytes on a new directory and returns it;
// the test's cleanup unmounts it. Where it cannot mount (not root), the
// test fails in CI (CI set) and is skipped elsewhere, saying why.
func Tmpfs(t testing.TB, size int64) string {
	t.Helper()
	return mount(t, "size="+strconv.FormatInt(size, 10))
}

// TmpfsInodes is Tmpfs holding at most inodes files and directories: a
// file system whose every mkdir fails with ENOSPC once they are used up.
func TmpfsInodes(t testing.TB, size, inodes int64) string {
	t.Helper()
	return mount(t, "size="+strconv.FormatInt(size, 10)+",nr_inodes="+strconv.FormatInt(inodes, 10))
}

// mount mounts a tmpfs with options on a new directory (Tmpfs).
func mount(t testing.TB, options string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tmpfs")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", options, "tmpfs", dir).CombinedOutput()
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("mount a tmpfs for the full-disk test (needs root): %v: %s", err, out)
		}
		t.Skipf("cannot mount a tmpfs for the full-disk test (needs root; in CI this fails instead): %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Errorf("unmount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// Fill writes a file of n bytes into dir (taking that much of its space)
// and returns its path; removing it gives the space back.
func Fill(t testing.TB, dir string, n int64) string {
	t.Helper()
	f, err := os.CreateTemp(dir, "filler-*")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for left := n; left > 0; left -= int64(len(buf)) {
		if _, err := f.Write(buf[:min(int64(len(buf)), left)]); err != nil {
			t.Fatalf("fill %s: %v", dir, err)
		}
	}
	return f.Name()
}
