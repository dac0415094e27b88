package lifecycle

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/mcpkeep/mcpkeep/atomicfile"
	"github.com/mcpkeep/mcpkeep/bootstrap"
	"github.com/mcpkeep/mcpkeep/lifecycle/internal/attach"
)

// ErrNotHome: the home directory holds files that are not a home's, so it
// is neither a new home nor an existing one.
var ErrNotHome = errors.New("lifecycle: directory is not a home")

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
	if _, err := os.Stat(filepath.Join(home, bootstrap.ConfigDir, ".git")); err == nil {
		return nil // an installed home that lost its stamp
	}
	slices.Sort(foreign)
	shown := foreign
	if len(shown) > 3 {
		shown = append(shown[:3:3], fmt.Sprintf("and %d more", len(foreign)-3))
	}
	return fmt.Errorf("lifecycle: %s holds files that are not a home's (%s), and no %s stamp: "+
		"give an empty or new directory to install a new home, or the directory of an existing home: %w",
		home, strings.Join(shown, ", "), bootstrap.VersionFile, ErrNotHome)
}

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
