package heliosmain

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/mcpkeep/mcpkeep/bootstrap"
	"github.com/mcpkeep/mcpkeep/lifecycle"
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
// the home's own problem is the one reported. It checks what the harness
// checks before it locks the home, whose errors name lifecycle.Options:
// a file, a path through a file or that this user cannot reach, a
// directory this user cannot create, one that holds other files than a
// home's, and another server's home. What it lets through the harness
// still refuses, in its own words.
func (h homeArg) check() error {
	fi, err := os.Stat(h.path)
	switch {
	case err == nil && !fi.IsDir():
		return fmt.Errorf("%s is a file, not a directory: give the path of a directory (one that does not exist yet is created), or move the file away%s",
			h, h.absolute())
	case errors.Is(err, syscall.ENOTDIR):
		return fmt.Errorf("%s is inside %s, which is a file, not a directory: give the path of a directory, or move the file away%s",
			h, fileAbove(h.path), h.absolute())
	case errors.Is(err, fs.ErrNotExist):
		return h.checkCreate()
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("%s cannot be reached (%v): give a directory this user may enter%s%s", h, err, h.suggest(), h.absolute())
	case err != nil:
		return fmt.Errorf("%s cannot be used (%v): give another directory%s", h, err, h.absolute())
	}
	if err := lifecycle.CheckNewHome(h.path); errors.Is(err, lifecycle.ErrNotHome) {
		return fmt.Errorf("%s holds files that are not a home's (%s), and no %s stamp: give an empty or new directory to install a new home%s, "+
			"or the directory of an existing home%s", h, foreign(h.path), bootstrap.VersionFile, h.suggest(), h.absolute())
	}
	if info, err := bootstrap.Detect(h.path, 0); err == nil && info.Server != "" && info.Server != serverName {
		return fmt.Errorf("%s is the home of the server %q (its %s says so), not of %s: give %s a home of its own%s%s",
			h, info.Server, bootstrap.VersionFile, serverName, serverName, h.suggest(), h.absolute())
	}
	return nil
}

// checkCreate refuses a home that is missing and that this user cannot
// create: the nearest directory above it that exists is not one this
// user may write.
func (h homeArg) checkCreate() error {
	missing, dir := h.path, filepath.Dir(h.path)
	for {
		_, err := os.Stat(dir)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrNotExist) || dir == filepath.Dir(dir) {
			return nil // the harness says why
		}
		missing, dir = dir, filepath.Dir(dir)
	}
	// AT_EACCESS: as the user helios runs as, which mkdir will be.
	if err := unix.Faccessat(unix.AT_FDCWD, dir, unix.W_OK|unix.X_OK, unix.AT_EACCESS); err != nil {
		return fmt.Errorf("%s cannot be created (%v): give a directory this user can create%s, or create it first, owned by the user helios runs as%s",
			h, &fs.PathError{Op: "mkdir", Path: missing, Err: err}, h.suggest(), h.absolute())
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

// suggest is ", such as ~/.helios", written out, or "" when that is this
// home or the user has no home directory.
func (h homeArg) suggest() string {
	user, err := os.UserHomeDir()
	if err != nil || !filepath.IsAbs(user) {
		return ""
	}
	if fi, err := os.Stat(user); err != nil || !fi.IsDir() {
		return ""
	}
	if def := filepath.Join(user, ".helios"); def != h.path {
		return ", such as " + def
	}
	return ""
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

// foreign lists, for a message, the entries of dir that are not a home's:
// up to three, then how many more.
func foreign(dir string) string {
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		if !lifecycle.IsHomeEntry(e.Name()) {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	if len(names) > 3 {
		names = append(names[:3:3], fmt.Sprintf("and %d more", len(names)-3))
	}
	return strings.Join(names, ", ")
}
