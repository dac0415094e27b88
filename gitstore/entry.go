package gitstore

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/mcpkeep/mcpkeep/atomicfile"
)

// ErrRefusedEntry is matched by every *EntryError.
var ErrRefusedEntry = errors.New("gitstore: entry refused")

// ErrUnsafePath is matched by the *EntryError of an entry whose path leads
// out of the work tree or into a .git directory, or through a link or a
// file of the work tree where it needs a directory.
var ErrUnsafePath = errors.New("gitstore: path outside the work tree")

// EntryError reports an entry of the history that gitstore does not write
// into the work tree (Restore, Rollback) nor return as a file's bytes
// (ReadAt): gitstore writes regular files inside the work tree only. A
// history made by gitstore holds nothing else; one made with the git CLI,
// or fetched, may. Besides ErrRefusedEntry it matches
// atomicfile.ErrNotRegular (a symbolic link, a submodule), or
// atomicfile.ErrTooLarge (larger than Options.MaxFileSize), or
// ErrUnsafePath.
type EntryError struct {
	Rev  string // the revision, as the caller gave it
	Path string // the entry's path in that revision, slash-separated
	What string // what it is, as a phrase: "a symbolic link", "a file of 2,000,000 bytes, more than the 1,048,576 allowed", …
	Err  error  // atomicfile.ErrNotRegular, atomicfile.ErrTooLarge or ErrUnsafePath
}

// Error names the entry and the revision, says what the entry is and what
// to do. It quotes the path (a history may name a file anything), never
// the entry's bytes or a link's target.
func (e *EntryError) Error() string {
	return fmt.Sprintf("gitstore: %q at %s is %s: refused, nothing was written (gitstore writes only regular files inside the work tree; "+
		"choose another revision, or copy what you need from this one by hand)", e.Path, e.Rev, e.What)
}

// Unwrap returns ErrRefusedEntry and Err.
func (e *EntryError) Unwrap() []error { return []error{ErrRefusedEntry, e.Err} }

// checkEntry returns an *EntryError for a file of revision rev that
// gitstore does not write into the work tree or return: one that is not a
// regular file, is larger than Options.MaxFileSize, or whose path is not a
// plain relative path outside every .git.
func (s *Store) checkEntry(rev string, f *object.File) error {
	refuse := func(what string, err error) error {
		return &EntryError{Rev: rev, Path: f.Name, What: what, Err: err}
	}
	if !safePath(f.Name) {
		return refuse("a path that leads out of the work tree or into a .git directory", ErrUnsafePath)
	}
	switch f.Mode {
	case filemode.Regular, filemode.Executable, filemode.Deprecated:
	case filemode.Symlink:
		return refuse("a symbolic link", atomicfile.ErrNotRegular)
	case filemode.Submodule:
		return refuse("a submodule", atomicfile.ErrNotRegular)
	default:
		return refuse(fmt.Sprintf("an entry of mode %o, not a regular file", uint32(f.Mode)), atomicfile.ErrNotRegular)
	}
	limit := s.opts.MaxFileSize
	if limit == 0 {
		limit = atomicfile.DefaultMaxSize
	}
	if limit > 0 && f.Size > limit {
		return refuse(fmt.Sprintf("a file of %d bytes, more than the %d allowed", f.Size, limit), atomicfile.ErrTooLarge)
	}
	return nil
}

// safePath reports whether p, a path from a tree of the history, names a
// file inside the work tree and outside every .git: slash-separated
// components, none empty, ".", ".." or .git in any case (a case-insensitive
// file system takes .GIT for .git).
func safePath(p string) bool {
	if p == "" || strings.ContainsRune(p, 0) {
		return false
	}
	for part := range strings.SplitSeq(p, "/") {
		if part == "" || part == "." || part == ".." || strings.EqualFold(part, ".git") {
			return false
		}
	}
	return filepath.IsLocal(filepath.FromSlash(p))
}

// checkWorkDirs returns an *EntryError when writing p (slash-separated,
// safe) into the work tree would go through something other than a
// directory (a link to a directory elsewhere, which a write would follow,
// or a file), or replace a directory.
func (s *Store) checkWorkDirs(rev, p string) error {
	path := s.dir
	parts := strings.Split(p, "/")
	for i, part := range parts {
		path = filepath.Join(path, part)
		fi, err := os.Lstat(path)
		if errors.Is(err, fs.ErrNotExist) {
			return nil // made by the write
		}
		if err != nil {
			return err
		}
		last := i == len(parts)-1
		switch {
		case last && fi.IsDir():
			return &EntryError{Rev: rev, Path: p, What: "a file where the work tree has a directory", Err: ErrUnsafePath}
		case !last && !fi.IsDir():
			return &EntryError{Rev: rev, Path: p, What: "to be written through " + s.rel(path) + ", which is " +
				atomicfile.Kind(fi.Mode()) + " in the work tree, not a directory", Err: ErrUnsafePath}
		}
	}
	return nil
}
