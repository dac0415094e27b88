//go:build darwin || freebsd || netbsd

package gitstore

import (
	"syscall"
	"time"
)

func ctime(st *syscall.Stat_t) time.Time { return time.Unix(st.Ctimespec.Unix()) }
