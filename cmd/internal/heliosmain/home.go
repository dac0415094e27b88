package heliosmain

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// homeArg is the home directory as the command line gave it, for the
// messages about it: helios's user set --home or HELIOS_HOME, not
// lifecycle.Options.Home.
type homeArg struct {
	from  string // "--home", "HELIOS_HOME", or "" for the default, ~/.helios
	given string // as the user wrote it
	path  string // the absolute path
	wd    string // for a relative one, the working directory it was taken from; else ""
}

// String names the home as the user gave it: `--home "/srv/h"`; a
// relative one also with the path it stands for and where from.
func (h homeArg) String() string {
	var s string
	switch h.from {
	case "":
		s = "the default home " + h.path
	default:
		s = fmt.Sprintf("%s %q", h.from, h.given)
	}
	if h.wd != "" {
		s += fmt.Sprintf(" (%s: relative to %s, the directory the MCP client started helios in)", h.path, h.wd)
	}
	return s
}

// check returns what makes h a directory helios cannot run on, said in
// the terms of the flag or variable that gave it, or nil. It reads only,
// and comes before anything else reads the home (its etcd.yaml), so that
// the home's own problem is the one reported: a file, or a path through a
// file or that cannot be looked up. A missing home, or one this user
// cannot reach, is the harness's to create or refuse.
func (h homeArg) check() error {
	fi, err := os.Stat(h.path)
	switch {
	case err == nil && !fi.IsDir():
		return fmt.Errorf("%s is a file, not a directory: give the path of a directory (one that does not exist yet is created), or move the file away%s",
			h, h.absolute())
	case errors.Is(err, syscall.ENOTDIR):
		return fmt.Errorf("%s is inside %s, which is a file, not a directory: give the path of a directory, or move the file away%s",
			h, fileAbove(h.path), h.absolute())
	case err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("%s cannot be used (%v): give another directory%s", h, err, h.absolute())
	}
	return nil
}

// absolute ends the fix for a relative home, whose meaning depends on the
// directory a client starts helios in; it is "" for an absolute one.
func (h homeArg) absolute() string {
	if h.wd == "" {
		return ""
	}
	return "; give it as an absolute path, the same from wherever a client starts helios"
}

// fileAbove returns the path above path that is not a directory, for a
// path whose stat says one of its parents is not (ENOTDIR): the one that
// stats as a file, below which every path fails with ENOTDIR.
func fileAbove(path string) string {
	for dir := filepath.Dir(path); dir != filepath.Dir(dir); dir = filepath.Dir(dir) {
		if fi, err := os.Stat(dir); err == nil && !fi.IsDir() {
			return dir
		}
	}
	return filepath.Dir(path) // replaced by a directory since
}
