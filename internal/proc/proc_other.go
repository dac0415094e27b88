//go:build unix && !linux && !darwin

package proc

import "errors"

// StartTime is not implemented on this system: it always fails, so
// statefile.New fails too (a record without a start time reads as dead).
func StartTime(pid int) (uint64, error) {
	if !Running(pid) {
		return 0, ErrNoProcess
	}
	return 0, errors.New("proc: start time not supported on this system")
}

// BootID returns "" on this system.
func BootID() string { return "" }

// Stopped reports whether pid is stopped (SIGSTOP, Ctrl-Z, a debugger):
// it is not told on this system, where it is always false.
func Stopped(pid int) bool { return false }
