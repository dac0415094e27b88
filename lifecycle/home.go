package lifecycle

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/mcpkeep/mcpkeep/atomicfile"
	"github.com/mcpkeep/mcpkeep/bootstrap"
	"github.com/mcpkeep/mcpkeep/lifecycle/internal/attach"
	"github.com/mcpkeep/mcpkeep/recovery"
	"github.com/mcpkeep/mcpkeep/statefile"
)

// ErrNotHome: the directory given as a home is not one. Run returns an
// *OptionsError naming Options.Home that matches it for a directory that
// holds files that are not a home's, so it is neither a new home nor an
// existing one; OpenHome, which installs no home, returns it for any path
// that is not an installed home.
var ErrNotHome = errors.New("lifecycle: directory is not a home")

// startsWithTilde reports whether a home's path starts with the ~ that
// only a shell expands: given to a program, "~/.helios" is a relative
// path to a directory named "~".
func startsWithTilde(home string) bool {
	return home == "~" || strings.HasPrefix(home, "~/")
}

// hasConfigRepo reports whether home has a config repository, the part of
// an installed home that no other directory has.
func hasConfigRepo(home string) bool {
	_, err := os.Stat(filepath.Join(home, bootstrap.ConfigDir, ".git"))
	return err == nil
}

// notHomeError is CheckHome's and OpenHome's refusal of a path that is
// not a home: it matches ErrNotHome, and fs.ErrNotExist too when nothing
// is at the path.
type notHomeError struct {
	msg     string
	missing bool
}

func (e *notHomeError) Error() string { return e.msg }

func (e *notHomeError) Unwrap() []error {
	if e.missing {
		return []error{ErrNotHome, fs.ErrNotExist}
	}
	return []error{ErrNotHome}
}

// notHome is a *notHomeError with a message from format and args.
func notHome(format string, args ...any) error {
	return &notHomeError{msg: "lifecycle: " + fmt.Sprintf(format, args...)}
}

// notHomeFix is the fix for a path that names no home.
const notHomeFix = "check the path; a server creates the home on its first start"

// CheckHome reports whether home is the directory of a home that a server
// installed, for tools that read or repair a home and must not create one
// where a mistyped path points: it returns nil for a directory with a
// config repository (config/.git) or a bootstrap stamp (.version), and
// otherwise an error that names the path and the fix and matches
// ErrNotHome: for an empty path; a path starting with ~, which only a shell expands; a
// missing path (the error also matches fs.ErrNotExist); a file; an empty
// directory; and a directory with neither (the user's home directory, a
// home's parent). A stamped home without its config repository passes:
// its install was interrupted, which a start finishes and which OpenHome
// refuses, but a tool may still report on it. An error reading the
// directory (permission, I/O) is returned as it is. CheckHome only reads.
func CheckHome(home string) error {
	if home == "" {
		return notHome("no home: the path is empty; give the directory of an existing home")
	}
	if startsWithTilde(home) {
		return notHome("home %q starts with ~, which only a shell expands: give the absolute path (in Go, build it with os.UserHomeDir())", home)
	}
	fi, err := os.Stat(home)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return &notHomeError{msg: fmt.Sprintf("lifecycle: home %s does not exist: %s", home, notHomeFix), missing: true}
	case err != nil:
		return fmt.Errorf("lifecycle: home: %w", err)
	case !fi.IsDir():
		return notHome("home %s is not a directory: %s", home, notHomeFix)
	case hasConfigRepo(home):
		return nil // installed, or an installed home that lost its stamp: gitstore and recovery handle the rest
	}
	info, err := bootstrap.Detect(home, 0)
	switch {
	case err != nil:
		return err
	case info.State == bootstrap.Fresh:
		return notHome("home %s is empty, not an installed home: %s", home, notHomeFix)
	}
	_, err = os.Stat(filepath.Join(home, bootstrap.VersionFile))
	switch {
	case err == nil:
		return nil // stamped: an install that lost, or never finished, its config repository
	case !errors.Is(err, fs.ErrNotExist):
		return err
	}
	return notHome("%s is not an installed home: no %s stamp and no %s/.git repository: %s, or give the directory of an existing home",
		home, bootstrap.VersionFile, bootstrap.ConfigDir, notHomeFix)
}

// CheckNewHome is CheckHome for a tool that also reports on a home not
// installed yet, such as `mcpkeep status`: it passes what CheckHome
// passes, an empty directory (a server's first start installs a home
// there), and a directory that holds nothing but a home's own entries (an
// install a crash interrupted, which the next start finishes). It
// refuses, with CheckHome's error, every other path: a missing one, a
// file, and a directory that also holds other files (the user's home
// directory, /tmp), where a server would refuse to install a home. It
// only reads.
func CheckNewHome(home string) error {
	err := CheckHome(home)
	if err == nil || !errors.Is(err, ErrNotHome) || home == "" || startsWithTilde(home) {
		return err
	}
	entries, rerr := os.ReadDir(home)
	if rerr != nil {
		return err // missing, or not a directory
	}
	for _, e := range entries {
		if !inLayout(e.Name(), nil) {
			return err
		}
	}
	return nil
}

// checkInstalled is CheckHome for OpenHome, which also refuses a stamped
// home without its config repository, whose install a start finishes.
func checkInstalled(home string) error {
	if err := CheckHome(home); err != nil {
		return err
	}
	if !hasConfigRepo(home) {
		return notHome("home %s has a %s stamp but no %s/.git repository: its install was interrupted; start the server once to finish it",
			home, bootstrap.VersionFile, bootstrap.ConfigDir)
	}
	return nil
}

// checkHomeDir refuses to install a home into a directory that already
// holds something else, such as ~/Documents given as the home by mistake:
// an install would scatter lock files, a stamp and directories among the
// user's files. A missing or empty directory is a new home, and a stamped
// one, or one with a config repository, is an existing home. A directory
// whose every entry belongs to a home's layout is an install to finish: a
// crash left part of it, or the user put config files in config/ before
// the first start. It only reads; an error reading the directory is left
// to the lock and bootstrap, which say what to do about it. A home holds
// nothing else at almost every start, and then it reads the directory and
// nothing more (bootstrap reads the stamp next anyway).
func checkHomeDir(home string, extraDirs []string) error {
	entries, err := os.ReadDir(home)
	if err != nil {
		return nil
	}
	var foreign []string
	for _, e := range entries {
		if !inLayout(e.Name(), extraDirs) {
			foreign = append(foreign, e.Name())
		}
	}
	if len(foreign) == 0 {
		return nil
	}
	info, err := bootstrap.Detect(home, 0)
	if err != nil || info.State != bootstrap.Incomplete {
		return nil // an installed home, with files of the user's beside it
	}
	if hasConfigRepo(home) {
		return nil // an installed home that lost its stamp
	}
	slices.Sort(foreign)
	shown := foreign
	if len(shown) > 3 {
		shown = append(shown[:3:3], fmt.Sprintf("and %d more", len(foreign)-3))
	}
	return &OptionsError{Field: "Home", Err: ErrNotHome, Problem: fmt.Sprintf("%s holds files that are not a home's (%s), and no %s stamp: "+
		"give an empty or new directory to install a new home, or the directory of an existing home",
		home, strings.Join(shown, ", "), bootstrap.VersionFile)}
}

// checkNotNested refuses a home inside another home, such as one in
// another home's config/: that home's server would commit this one's
// files into its history (its state file's bearer token, pushed with the
// history to any git remote) and recovery there would move this one's
// socket and temporary files away. A directory is a home if it has a stamp
// that parses and a config repository (a stray .version or config/.git of
// the user's is not enough). It only reads: a stat per directory above
// home, and a read of the stamp where there is one.
func checkNotNested(home string) error {
	for dir := filepath.Dir(home); ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, bootstrap.VersionFile)); err == nil && installed(dir) {
			where, _ := filepath.Rel(dir, home)
			return fmt.Errorf("lifecycle: %s is inside the home %s (at %s): that home's server would commit this "+
				"home's files into its own history, its bearer token included, and move its socket away: "+
				"give a directory outside %s: %w", home, dir, where, dir, ErrNotHome)
		}
		if parent := filepath.Dir(dir); parent == dir {
			return nil
		}
	}
}

// installed reports whether dir is an installed home: a stamp that
// parses and a config repository.
func installed(dir string) bool {
	info, err := bootstrap.Detect(dir, 0)
	return err == nil && info.State != bootstrap.Fresh && info.State != bootstrap.Incomplete
}

// IsHomeEntry reports whether name, an entry of a home's top directory,
// is one the toolkit makes or expects there (the stamp, config/, the
// lock's files, the state file, the attach socket, their temporary
// files, ...): the entries by which a directory is, or is not, a home.
// A server's Spec.Dirs are its own too; they are not counted here.
func IsHomeEntry(name string) bool { return inLayout(name, nil) }

// inLayout reports whether name, an entry of a home's top directory, is
// part of the home layout or left by a write into it.
func inLayout(name string, extraDirs []string) bool {
	if bootstrap.IsLayoutName(name) {
		return true
	}
	for _, d := range extraDirs {
		if first, _, _ := strings.Cut(filepath.ToSlash(filepath.Clean(d)), "/"); name == first {
			return true
		}
	}
	// .lock, .lock.flock, lockfile's temporary files and copies of a
	// garbage PID file; the health check's probe; atomicfile's temporary
	// files (of .version and state.json); the attach socket.
	return strings.HasPrefix(name, LockFile) || strings.HasPrefix(name, healthProbe) || atomicfile.IsTemp(name) ||
		attach.IsSocketName(name)
}

// clearDeadWriter removes what a writer that died (SIGKILL, a crash) left
// in home for status to find, for OpenHome, which starts no server and so
// runs no start-up recovery: the state file, when it names a process that
// is not running, is moved to backups/ by recovery's own step, as a
// start moves it; and the sockets doctor --fix removes (RemoveStaleSockets:
// the home's and the one the state file names, and the temporary ones
// beside each, each only if it is a socket that refuses a connection),
// with or without a state file. A state file of a live process, or one
// that does not parse, is left for status and doctor to report; while it
// names a live process, so are the sockets. The caller holds the home's
// lock. The caller's work does not depend on it, so what it cannot remove
// it logs.
func clearDeadWriter(home string, log *slog.Logger) {
	s, err := statefile.Read(filepath.Join(home, statefile.FileName))
	if s.Ours() {
		return
	}
	if err == nil && !s.Alive() {
		if _, err := recovery.MoveStaleState(recovery.Options{Home: home, Logger: log}); err != nil {
			log.Warn("could not move a dead server's state file to backups/", "pid", s.PID, "err", err)
		}
	}
	removed, err := removeStaleSockets(home, s)
	for _, sock := range removed {
		log.Warn("removed a dead server's socket", "path", sock)
	}
	if err != nil {
		log.Warn("could not remove a dead server's socket", "err", err)
	}
}
