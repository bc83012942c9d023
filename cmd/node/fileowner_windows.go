package main

import "os"

// fileOwner: Windows files have no owner and group the command keeps.
func fileOwner(os.FileInfo) (uid, gid int, ok bool) { return 0, 0, false }
