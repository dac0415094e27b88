package lifecycle

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/mcpkeep/mcpkeep/atomicfile"
	"github.com/mcpkeep/mcpkeep/internal/proc"
	"github.com/mcpkeep/mcpkeep/lifecycle/internal/attach"
	"github.com/mcpkeep/mcpkeep/statefile"
)

// StaleSockets returns the attach sockets that a writer of home which is
// not running left behind, for a caller that reports them without the
// home's lock (`mcpkeep doctor` without --fix): the home's socket
// (<home>/mcp.sock, or the path outside the home that a home whose path is
// too long for a socket address gets) and the one the home's state file
// names, each if it is a socket nothing listens on, and after each the
// temporary sockets beside it that nothing listens on (.mcp.sock.*: a
// writer killed between binding its socket and renaming it into place
// leaves one, with or without a socket at the path). While the home's PID
// lock file or state file names a running process it returns none: a
// writer holds the home, and its socket is live or about to be (a process
// that exited and is not reaped yet, a zombie, holds nothing; nor does
// one that took a dead writer's pid since, LockHolderLive). It changes
// nothing; it dials each socket once.
func StaleSockets(home string) []string {
	abs, err := filepath.Abs(home)
	if err != nil {
		return nil
	}
	s, _ := statefile.Read(filepath.Join(abs, statefile.FileName))
	if data, err := atomicfile.ReadFile(filepath.Join(abs, LockFile)); err == nil {
		if pid, err := ParseLockContent(data); err == nil && LockHolderLive(pid, s) {
			return nil
		}
	}
	return staleSockets(abs, s)
}

// staleSockets returns the sockets of home, whose state file (if any) is
// s, and the temporary ones beside them, that nothing listens on; none
// while s names a live process. It dials each once.
func staleSockets(home string, s *statefile.State) []string {
	if s.Alive() {
		return nil
	}
	var stale []string
	for _, p := range withTemps(socketPaths(home, s)) {
		if attach.IsStale(p) {
			stale = append(stale, p)
		}
	}
	return stale
}

// LockHolderLive reports whether pid, read from a home's PID lock file,
// is a writer that runs: a live process (a zombie is none) that, when s,
// the home's state file (or nil), names pid, is the process s was
// written for, by its start time and boot. After a reboot, or long after
// a writer died, another process may run under its pid: the lock is
// stale all the same. Tools that judge a lock without taking it (status,
// doctor, StaleSockets) judge it by this one rule.
func LockHolderLive(pid int, s *statefile.State) bool {
	if s != nil && s.PID == pid {
		return s.Alive()
	}
	return proc.Live(pid)
}

// RemoveStaleSockets removes the sockets StaleSockets finds in the locked
// home, the temporary ones beside them included, and returns the paths it
// removed; the PID lock file names the lock's holder now, so it is not
// looked at. The lock is what makes removing them safe: no writer of the
// home runs, and none can start and bind a socket meanwhile. A socket
// something listens on is left alone all the same, and so is anything
// that is not a socket, and everything while the state file names a live
// process. Call it before the state file is moved aside (recovery.Run does
// that), since the path it names may be the only record of a socket
// outside the home.
func (l *HomeLock) RemoveStaleSockets() ([]string, error) {
	s, _ := statefile.Read(filepath.Join(l.home, statefile.FileName))
	return removeStaleSockets(l.home, s)
}

// removeStaleSockets is RemoveStaleSockets of home, whose state file (if
// any) is s, for a caller that holds the home's lock: RemoveStaleSockets,
// and OpenHome's clean-up of a dead writer.
func removeStaleSockets(home string, s *statefile.State) ([]string, error) {
	var removed []string
	var errs []error
	for _, p := range staleSockets(home, s) {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("lifecycle: remove the stale socket: %w", err))
			continue
		}
		removed = append(removed, p)
	}
	return removed, errors.Join(errs...)
}

// withTemps returns paths, each socket path followed by the entries
// beside it that carry a temporary name attach.Listen binds it under
// (attach.Temps), whatever they are: the caller dials each.
func withTemps(paths []string) []string {
	var all []string
	for _, p := range paths {
		all = append(all, p)
		all = append(all, attach.Temps(p)...)
	}
	return all
}

// socketPaths returns where a writer of home, whose state file (if any)
// is s, may have bound its socket: the path attach gives home, and the
// absolute path s names, which may differ when the writer's environment
// put the socket of a long home's path elsewhere.
func socketPaths(home string, s *statefile.State) []string {
	paths := []string{attach.Path(home)}
	if s != nil && s.Socket != "" && s.Socket != paths[0] && filepath.IsAbs(s.Socket) {
		paths = append(paths, s.Socket)
	}
	return paths
}
