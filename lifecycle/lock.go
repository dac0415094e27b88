package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gofrs/flock"
	"github.com/nightlyone/lockfile"

	"github.com/mcpkeep/mcpkeep/atomicfile"
	"github.com/mcpkeep/mcpkeep/bootstrap"
	"github.com/mcpkeep/mcpkeep/internal/failpoint"
	"github.com/mcpkeep/mcpkeep/internal/proc"
	"github.com/mcpkeep/mcpkeep/statefile"
)

// Lock files inside a home.
const (
	LockFile  = ".lock"       // PID file, content "<pid>\n" (lockfile's format)
	FlockFile = ".lock.flock" // held with an exclusive flock; never removed
)

// ErrLocked: another live process holds the home.
var ErrLocked = errors.New("lifecycle: home is locked")

// LockedError names the process that holds a home. Its message says who
// holds the home, not what to do about it, which depends on what the
// caller wanted: Run adds "stop it or use another home", an operator tool
// that writes beside no server says to stop the server first.
type LockedError struct {
	Home  string           // the home's absolute path
	PID   int              // 0 when the PID file is being written
	Since time.Time        // when the PID file was written
	State *statefile.State // the holder's state file, if it is readable and names it
}

// Error names the home and the process holding it.
func (e *LockedError) Error() string {
	home := e.Home
	if h, err := os.UserHomeDir(); err == nil && h != "/" && strings.HasPrefix(home, h+"/") {
		home = "~" + home[len(h):]
	}
	var b strings.Builder
	fmt.Fprintf(&b, "home %s is in use", home)
	if e.PID > 0 {
		fmt.Fprintf(&b, " by pid %d", e.PID)
	}
	var about []string
	if s := e.State; s != nil {
		about = append(about, s.Name)
		about = append(about, "started "+s.StartedAt.Local().Format("15:04"))
		if s.HTTP != nil {
			about = append(about, s.HTTP.URL)
		}
	} else if !e.Since.IsZero() {
		about = append(about, "since "+e.Since.Local().Format("15:04"))
	}
	if len(about) > 0 {
		fmt.Fprintf(&b, " (%s)", strings.Join(about, ", "))
	}
	return b.String()
}

// Unwrap returns ErrLocked.
func (e *LockedError) Unwrap() error { return ErrLocked }

// HomeLock is a held home lock. Release it with Unlock.
type HomeLock struct {
	home      string
	fl        *flock.Flock
	pidFile   lockfile.Lockfile
	reclaimed []string

	mu       sync.Mutex
	released bool
}

// TryLock takes the home's lock without waiting, creating the home (0700)
// if it is missing. It returns a *LockedError when a live process holds
// it. Stale PID files (dead PID, reused PID, empty or garbage content) are
// reclaimed; Reclaimed says what was found. An empty home is an error, not
// the current directory.
func TryLock(home string) (*HomeLock, error) {
	if home == "" {
		return nil, errors.New("lifecycle: lock: the home is empty; give the home directory's path")
	}
	abs, err := filepath.Abs(home)
	if err != nil {
		return nil, err
	}
	if err := atomicfile.MkdirAll(abs, 0o700); err != nil {
		return nil, err
	}
	if err := checkOwner(abs); err != nil {
		return nil, liveHolderOr(abs, err)
	}
	flockPath := filepath.Join(abs, FlockFile)
	fl := flock.New(flockPath, flock.SetPermissions(0o600))
	ok, err := fl.TryLock()
	if errors.Is(err, fs.ErrPermission) {
		return nil, liveHolderOr(abs, fmt.Errorf("lifecycle: %s is not writable by this user (uid %d); run as the home's owner or use another home: %w",
			flockPath, os.Getuid(), fs.ErrPermission))
	}
	if err != nil {
		return nil, fmt.Errorf("lifecycle: lock %s: %w", flockPath, err)
	}
	if !ok {
		return nil, lockedError(abs)
	}
	l := &HomeLock{home: abs, fl: fl}
	if err := l.takePIDFile(); err != nil {
		fl.Unlock()
		return nil, err
	}
	return l, nil
}

// liveHolderOr returns the *LockedError naming the home's live holder, for
// a process that may not take another user's home: it goes on to attach,
// which the writer refuses by its peer's uid. With no live holder, it
// returns err.
func liveHolderOr(home string, err error) error {
	if e := lockedError(home); e.PID > 0 && proc.Live(e.PID) {
		return e
	}
	return err
}

// checkOwner refuses, to root, a home that belongs to another user (the
// directory or its stamp), before anything in it is written: root can
// write into any user's home, and every file it wrote there would be
// root's (0600), so the home's owner could no longer start its server on
// it (sudo npx ..., a root container on a volume of the host's user: run
// it with that user's uid). Other users are left to the file modes: a
// home they cannot write fails at the lock, and one they may write (a
// group-writable volume) is theirs to use.
func checkOwner(home string) error {
	if os.Geteuid() != 0 {
		return nil
	}
	var st *syscall.Stat_t
	for _, p := range []string{home, filepath.Join(home, bootstrap.VersionFile)} {
		fi, err := os.Lstat(p)
		if err != nil {
			continue // the home was just made, or is not installed yet
		}
		if s, ok := fi.Sys().(*syscall.Stat_t); ok && s.Uid != 0 {
			st = s
			break
		}
	}
	if st == nil {
		return nil
	}
	owner := fmt.Sprintf("uid %d", st.Uid)
	if u, err := user.LookupId(strconv.Itoa(int(st.Uid))); err == nil {
		owner = fmt.Sprintf("%s (uid %d)", u.Username, st.Uid)
	}
	return &explained{prefix: fmt.Sprintf("lifecycle: the home %s belongs to %s, and this process runs as uid %d: "+
		"run the server as the home's owner, or give it a home of its own "+
		"(a process of another user would leave files there that its owner cannot read)",
		home, owner, os.Geteuid()), err: fs.ErrPermission}
}

// takePIDFile writes our PID into .lock with lockfile, reclaiming whatever
// was there: we hold the flock, so no live holder can exist. The old file is
// looked at first, because lockfile would remove a dead or garbage one
// without a word.
func (l *HomeLock) takePIDFile() error {
	if err := failpoint.Hit("lifecycle.lock-after-flock"); err != nil {
		return err
	}
	path := filepath.Join(l.home, LockFile)
	pf, err := lockfile.New(path)
	if err != nil {
		return err
	}
	l.pidFile = pf
	if err := l.reclaim(path); err != nil {
		return err
	}
	for range 5 {
		err := pf.TryLock()
		if err == nil {
			return nil
		}
		if !errors.Is(err, lockfile.ErrBusy) && !errors.Is(err, lockfile.ErrNotExist) {
			return fmt.Errorf("lifecycle: write PID file %s: %w", path, err)
		}
		if errors.Is(err, lockfile.ErrBusy) {
			// lockfile trusts any live PID; the flock says it is not the
			// holder: a PID reused after a crash or a reboot.
			if err := l.reclaim(path); err != nil {
				return err
			}
		}
	}
	return fmt.Errorf("lifecycle: PID file %s keeps changing; is another tool writing it?", path)
}

// reclaim records and removes a stale PID file. Content that is not a PID is
// copied into backups/ first: nothing is deleted that cannot be looked at.
func (l *HomeLock) reclaim(path string) error {
	data, err := atomicfile.ReadFile(path) // no link followed, no pipe waited on
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	var refused *atomicfile.RefusedError
	if errors.As(err, &refused) {
		return l.setAside(path, refused)
	}
	if err != nil {
		return err
	}
	pid, perr := ParseLockContent(data)
	switch {
	case perr != nil:
		note := fmt.Sprintf("%s held %s", path, perr)
		if saved, err := l.saveGarbage(path); err == nil {
			note += "; copied to " + saved
		} else {
			note += fmt.Sprintf("; could not copy it aside: %v", err)
		}
		l.reclaimed = append(l.reclaimed, note)
	case proc.Live(pid):
		l.reclaimed = append(l.reclaimed, fmt.Sprintf("%s named pid %d, which runs but does not hold the lock (a reused pid)", path, pid))
	default:
		l.reclaimed = append(l.reclaimed, fmt.Sprintf("%s named pid %d, which is not running", path, pid))
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// setAside moves what is at path, which is no PID file (a link, a pipe, a
// huge file), into the home's backups/ as it is, and notes it.
func (l *HomeLock) setAside(path string, refused *atomicfile.RefusedError) error {
	dir := filepath.Join(l.home, bootstrap.BackupsDir)
	if err := atomicfile.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	dst := filepath.Join(dir, filepath.Base(path)+"."+time.Now().UTC().Format("20060102T150405.000000000Z")+".bak")
	if err := os.Rename(path, dst); err != nil {
		return fmt.Errorf("lifecycle: PID file %s is not a regular file and could not be moved aside: %w", path, err)
	}
	if err := atomicfile.SyncDir(dir); err != nil {
		return err
	}
	what := refused.Kind()
	if refused.Mode.Type() == 0 {
		what = fmt.Sprintf("a file of %d bytes", refused.Size)
	}
	l.reclaimed = append(l.reclaimed, fmt.Sprintf("%s was %s, not a PID file; moved to %s", path, what, dst))
	return atomicfile.SyncDir(l.home)
}

// saveGarbage copies the PID file at path into the home's backups/,
// creating it (0700, durably) in a home not yet installed: a copy beside
// the lock, in the home's top directory, would stay there for good, and
// make bootstrap take the home for an interrupted install.
func (l *HomeLock) saveGarbage(path string) (string, error) {
	dir := filepath.Join(l.home, bootstrap.BackupsDir)
	if err := atomicfile.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	return atomicfile.Backup(path, dir)
}

// ParseLockContent parses a PID file's content, "<pid>\n".
func ParseLockContent(data []byte) (int, error) {
	s := strings.TrimSpace(string(data))
	if s == "" {
		return 0, errors.New("no PID (empty file)")
	}
	pid, err := strconv.Atoi(s)
	if err != nil || pid <= 0 {
		if len(s) > 40 {
			s = s[:40] + "…"
		}
		return 0, fmt.Errorf("%q, not a PID", s)
	}
	return pid, nil
}

// lockedError describes the current holder of home from its PID file and
// state file.
func lockedError(home string) *LockedError {
	e := &LockedError{Home: home}
	path := filepath.Join(home, LockFile)
	if data, err := atomicfile.ReadFile(path); err == nil {
		e.PID, _ = ParseLockContent(data)
		if fi, err := os.Stat(path); err == nil {
			e.Since = fi.ModTime()
		}
	}
	if s, err := statefile.Read(filepath.Join(home, statefile.FileName)); err == nil && (e.PID == 0 || s.PID == e.PID) && s.Alive() {
		e.State = s
		e.PID = s.PID
	}
	return e
}

// Lock takes the home's lock, waiting with backoff while another process
// holds it, until ctx ends; then it returns ctx's error joined with the last
// *LockedError.
func Lock(ctx context.Context, home string) (*HomeLock, error) {
	delay := 10 * time.Millisecond
	for {
		l, err := TryLock(home)
		if !errors.Is(err, ErrLocked) {
			return l, err
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, errors.Join(ctx.Err(), err)
		case <-t.C:
		}
		delay = min(delay*2, 500*time.Millisecond)
	}
}

// Home returns the locked home's absolute path.
func (l *HomeLock) Home() string { return l.home }

// Reclaimed describes the stale lock files TryLock reclaimed, for the
// caller to log or report.
func (l *HomeLock) Reclaimed() []string { return l.reclaimed }

// Check verifies the lock is still ours: the flock is held and the PID file
// names this process. A PID file someone deleted is written again, and
// reported.
func (l *HomeLock) Check() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.released {
		return errors.New("lifecycle: lock was released")
	}
	if !l.fl.Locked() {
		return fmt.Errorf("lifecycle: flock on %s is not held", l.fl.Path())
	}
	path := filepath.Join(l.home, LockFile)
	data, err := atomicfile.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		if err := l.pidFile.TryLock(); err != nil {
			return fmt.Errorf("lifecycle: PID file %s was deleted and could not be rewritten: %w", path, err)
		}
		return fmt.Errorf("lifecycle: PID file %s was deleted; rewritten", path)
	}
	if err != nil {
		return err
	}
	if pid, err := ParseLockContent(data); err != nil || pid != os.Getpid() {
		return fmt.Errorf("lifecycle: PID file %s no longer names this process (%d): %s", path, os.Getpid(), strings.TrimSpace(string(data)))
	}
	return nil
}

// Unlock releases the lock. It removes the PID file only if it still names
// this process, and never removes the flock file. It is idempotent, and a
// no-op on a nil or zero HomeLock, so a deferred Unlock is always safe.
func (l *HomeLock) Unlock() error {
	if l == nil || l.fl == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.released {
		return nil
	}
	l.released = true
	err := l.pidFile.Unlock()
	if errors.Is(err, lockfile.ErrRogueDeletion) {
		err = nil // gone or someone else's: not ours to remove
	}
	if ferr := l.fl.Unlock(); ferr != nil && !errors.Is(ferr, syscall.EBADF) {
		err = errors.Join(err, ferr)
	}
	return err
}
