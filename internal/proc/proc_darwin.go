package proc

import (
	"errors"
	"strings"

	"golang.org/x/sys/unix"
)

// StartTime returns the start time of pid in microseconds since the epoch,
// from sysctl kern.proc.pid. A zombie (exited, not yet reaped by its
// parent) has no start time: it returns ErrNoProcess.
func StartTime(pid int) (uint64, error) {
	if pid <= 0 {
		return 0, ErrNoProcess
	}
	kp, err := unix.SysctlKinfoProc("kern.proc.pid", pid)
	if err != nil {
		if errors.Is(err, unix.ESRCH) {
			return 0, ErrNoProcess
		}
		return 0, err
	}
	const szomb = 5 // SZOMB in <sys/proc.h>
	if kp.Proc.P_pid != int32(pid) || kp.Proc.P_stat == szomb {
		return 0, ErrNoProcess
	}
	tv := kp.Proc.P_starttime
	return uint64(tv.Sec)*1e6 + uint64(tv.Usec), nil
}

// BootID returns the kernel's boot session UUID, or "" when it cannot be read.
func BootID() string {
	s, err := unix.Sysctl("kern.bootsessionuuid")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(s)
}

// Stopped reports whether pid is stopped (SIGSTOP, Ctrl-Z, a debugger):
// it is not told on macOS, where it is always false.
func Stopped(pid int) bool { return false }
