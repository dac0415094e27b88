//go:build !linux && !darwin && !freebsd && !netbsd

package gitstore

import (
	"syscall"
	"time"
)

// ctime is unknown here: the index entry keeps a zero ctime, and the git
// CLI rehashes the file once to see it is clean.
func ctime(*syscall.Stat_t) time.Time { return time.Time{} }
