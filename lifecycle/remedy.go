package lifecycle

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"syscall"

	"github.com/mcpkeep/mcpkeep/atomicfile"
)

// remedy says what a person can do about err when it is a file system
// error a disk or an administrator causes (full, read-only, permissions,
// I/O), or returns "" for any other error.
func remedy(err error, home string) string {
	switch {
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return fmt.Sprintf("the disk holding %s is full: free some space, then retry", home)
	case errors.Is(err, syscall.EROFS):
		return fmt.Sprintf("the file system holding %s is read-only: remount it read-write, then retry", home)
	case errors.Is(err, fs.ErrPermission):
		return fmt.Sprintf("permission denied: run the server as the owner of %s, or give that user back the file named here", home)
	case errors.Is(err, syscall.EIO):
		return fmt.Sprintf("I/O error: the disk may be failing: check the kernel log (dmesg), copy %s somewhere safe, then run `mcpkeep doctor --home %s`", home, home)
	}
	return ""
}

// explained is an error with what to do about it in front.
type explained struct {
	prefix string // what failed and the remedy
	err    error
}

func (e *explained) Error() string { return e.prefix + ": " + e.err.Error() }
func (e *explained) Unwrap() error { return e.err }

// withRemedy prefixes err with its remedy, if it has one and has not been
// given it yet (an Update's error reaching Run at shutdown, say).
func withRemedy(err error, home string) error {
	var done *explained
	if errors.As(err, &done) {
		return err
	}
	if r := remedy(err, home); r != "" {
		return &explained{prefix: r, err: err}
	}
	return err
}

// Explain adds to err, when it is a disk or permission error (ENOSPC,
// EDQUOT, EROFS, EACCES, EPERM, EIO), what a person can do about it: free
// space, remount read-write, give the files back to the server's user, or
// check the disk. A *atomicfile.CorruptError (as atomicfile.ReadYAML
// returns it, unwrapped) of a file in ConfigDir gets its remedy too:
// restart the server, or run `mcpkeep doctor --fix` with it stopped, to
// restore the file from git; so does a *atomicfile.RefusedError (a link, a
// pipe, a file too large) there. Other errors, and nil, are returned as
// they are. Update and Commit already explain their errors; use Explain
// for a tool's own reads and writes.
func (e *Env) Explain(err error) error {
	if err == nil {
		return nil
	}
	if ce, ok := err.(*atomicfile.CorruptError); ok && ce.Remedy == "" && within(e.ConfigDir, ce.Path) {
		c := *ce
		c.Remedy = fmt.Sprintf("restart the server, or stop it and run `mcpkeep doctor --fix --home %s`: "+
			"either moves the file to backups/ and puts back its last good version from git; or fix it by hand", e.Home)
		return &c
	}
	if re, ok := err.(*atomicfile.RefusedError); ok && re.Remedy == "" && within(e.ConfigDir, re.Path) {
		r := *re
		r.Remedy = fmt.Sprintf("restart the server, or stop it and run `mcpkeep doctor --fix --home %s`: "+
			"either moves it to backups/ and puts back the file's last good version from git; "+
			"config files are read only as regular files of at most %s, never through a link", e.Home, sizeLimit(e.MaxFileSize))
		return &r
	}
	return withRemedy(err, e.Home)
}

// sizeLimit words the size limit limit (0 for the default).
func sizeLimit(limit int64) string {
	switch {
	case limit == 0:
		limit = atomicfile.DefaultMaxSize
	case limit < 0:
		return "any size"
	}
	if limit%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", limit>>20)
	}
	return fmt.Sprintf("%d bytes", limit)
}

// within reports whether path is inside dir.
func within(dir, path string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != "." && filepath.IsLocal(rel)
}
