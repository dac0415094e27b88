//go:build unix

// Package proc tells whether a process is running and when it started, so a
// PID written to a file can be checked against PID reuse.
//
// A start time is an opaque number that is stable for the life of a process
// and differs between two processes that held the same PID at different
// times (Linux: clock ticks since boot, /proc/<pid>/stat field 22; macOS:
// microseconds since the epoch from sysctl kern.proc.pid). Compare start
// times only with other values from StartTime on the same machine and boot.
package proc

import (
	"errors"
	"os"
	"syscall"
)

// ErrNoProcess reports that no process has the PID.
var ErrNoProcess = errors.New("proc: no such process")

// Running reports whether a process with pid exists. A process of another
// user (EPERM) exists.
func Running(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// Live reports whether pid runs and has not exited. Unlike Running, a
// zombie (exited, not yet reaped by its parent) is not live: it holds no
// lock, socket or file any more, though its PID is not free for reuse yet.
// Where the start time cannot be read for another reason (a hardened
// /proc, a system without start times), a running pid is live.
func Live(pid int) bool {
	if !Running(pid) {
		return false
	}
	_, err := StartTime(pid)
	return !errors.Is(err, ErrNoProcess)
}

// Alive reports whether pid runs and started at start. A zero start is no
// start time at all, and is never alive: it cannot show that the process
// running now under pid is the one the record was written for.
func Alive(pid int, start uint64) bool {
	if start == 0 || !Running(pid) {
		return false
	}
	got, err := StartTime(pid)
	if err != nil {
		// The process exists but its start time cannot be read (a
		// hardened /proc): trust the PID rather than steal its lock.
		return !errors.Is(err, ErrNoProcess)
	}
	return got == start
}

// Self returns the current process's PID and start time.
func Self() (pid int, start uint64, err error) {
	pid = os.Getpid()
	start, err = StartTime(pid)
	return pid, start, err
}
