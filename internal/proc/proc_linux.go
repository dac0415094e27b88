package proc

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
)

// StartTime returns the start time of pid in clock ticks since boot, from
// field 22 of /proc/<pid>/stat. A zombie (exited, not yet reaped by its
// parent) has no start time: it returns ErrNoProcess.
func StartTime(pid int) (uint64, error) {
	if pid <= 0 {
		return 0, ErrNoProcess
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if errors.Is(err, fs.ErrNotExist) {
		return 0, ErrNoProcess
	}
	if err != nil {
		return 0, err
	}
	start, state, err := parseStat(b)
	if err != nil {
		return 0, fmt.Errorf("proc: /proc/%d/stat: %w", pid, err)
	}
	if state == 'Z' || state == 'X' {
		return 0, ErrNoProcess
	}
	return start, nil
}

// Stopped reports whether pid is stopped: by a signal (SIGSTOP, SIGTSTP,
// Ctrl-Z in a terminal), state T in /proc/<pid>/stat, or by a tracer such
// as a debugger, state t. A stopped process runs no code until it is
// continued (SIGCONT). It is false for a process in any other state, for
// no process, and when the state cannot be read.
func Stopped(pid int) bool {
	if pid <= 0 {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	_, state, err := parseStat(b)
	return err == nil && (state == 'T' || state == 't')
}

// parseStat extracts field 22 (starttime) and field 3 (state) from a
// /proc/<pid>/stat line. The command name (field 2) is in parentheses and
// may hold spaces and ')', so fields are counted after the last ')'.
func parseStat(b []byte) (start uint64, state byte, err error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, errors.New("malformed stat line: no ')'")
	}
	fields := bytes.Fields(b[i+1:])
	// fields[0] is field 3 (state); starttime is field 22.
	const idx = 22 - 3
	if len(fields) <= idx {
		return 0, 0, fmt.Errorf("stat line has %d fields, want at least 22", len(fields)+2)
	}
	start, err = strconv.ParseUint(string(fields[idx]), 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("stat field 22: %w", err)
	}
	return start, fields[0][0], nil
}

// BootID returns the kernel's boot id, or "" when it cannot be read.
func BootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return string(bytes.TrimSpace(b))
}
