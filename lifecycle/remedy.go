package lifecycle

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
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
// check the disk (`mcpkeep doctor`, which only reads, runs beside a live
// server). A *atomicfile.CorruptError (as atomicfile.ReadYAML returns it,
// unwrapped) of a file in ConfigDir gets its remedy too: fix the file by
// hand or, for a *.yaml, *.yml or *.json file that is not valid YAML or
// JSON, let the server's next start, or `mcpkeep doctor --fix`, move it to
// backups/ and put back its last good version from git. doctor --fix
// refuses to run while a server, or a program holding OpenHome's Env,
// holds the home, and checks syntax only: it knows neither the server's
// Options.Validate nor a struct's fields. A *atomicfile.RefusedError (a
// link, a pipe, a file too large) there gets the same remedy, but for a
// directory not named like a config file, which recovery leaves alone
// (doctor reads with the limit the server's start recorded,
// HomeMaxFileSize, so it refuses what the server refuses). Other errors,
// and nil, are returned as they are. Update and
// Commit already explain their errors; use Explain for a tool's own reads
// and writes.
func (e *Env) Explain(err error) error {
	if err == nil {
		return nil
	}
	if ce, ok := err.(*atomicfile.CorruptError); ok && ce.Remedy == "" && within(e.ConfigDir, ce.Path) {
		c := *ce
		c.Remedy = "fix the file by hand"
		if configName(ce.Path) {
			c.Remedy += fmt.Sprintf("; or, if it is not valid YAML or JSON, let the server's next start, "+
				"or `mcpkeep doctor --fix --home %s` once no server or other program holds the home, "+
				"move it to backups/ and put back its last good version from git, if it has one", e.Home)
		}
		return &c
	}
	if re, ok := err.(*atomicfile.RefusedError); ok && re.Remedy == "" && within(e.ConfigDir, re.Path) {
		r := *re
		r.Remedy = fmt.Sprintf("config files are read only as regular files of at most %s, never through a link: put one in its place",
			sizeLimit(e.MaxFileSize))
		if !re.Mode.IsDir() || configName(re.Path) { // recovery leaves other directories alone
			fixers := fmt.Sprintf("the server's next start, or `mcpkeep doctor --fix --home %s` once no server or other program holds the home,", e.Home)
			r.Remedy += fmt.Sprintf("; or let %s move what is there to backups/ and put back the file's last good version from git, if it has one", fixers)
		}
		return &r
	}
	return withRemedy(err, e.Home)
}

// configName reports whether recovery, at a start or in doctor --fix,
// parses the config file at path and quarantines a directory there: it
// does for files named *.yaml, *.yml and *.json.
func configName(path string) bool {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
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
