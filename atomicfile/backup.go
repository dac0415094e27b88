package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/google/renameio/v2"
)

// Backup durably copies the file at path into dir (the file's own directory
// when dir is "") as <name>.<UTC time>.bak and returns the copy's path. It
// never overwrites an earlier backup: a name already taken gets a -2, -3, …
// suffix. The copy keeps the file's mode. Like ReadFile, it copies only a
// regular file and never follows a symbolic link: anything else is a
// *RefusedError. It copies a file of any size.
func Backup(path, dir string) (string, error) {
	data, err := Reader{MaxSize: -1}.ReadFile(path)
	if err != nil {
		return "", err
	}
	fi, err := os.Lstat(path)
	if err != nil {
		return "", err
	}
	if dir == "" {
		dir = filepath.Dir(path)
	}
	stamp := time.Now().UTC().Format("20060102T150405.000000000Z")
	return CopyNew(filepath.Join(dir, filepath.Base(path)+"."+stamp+".bak"), data, fi.Mode().Perm())
}

// CopyNew durably writes data to a new file at path, or, when path is taken,
// to path-2, path-3, … and returns the name it used. It never replaces an
// existing file: the data is written to a temporary file, fsynced, and
// hard-linked to the new name, which fails rather than overwrite.
func CopyNew(path string, data []byte, perm fs.FileMode) (string, error) {
	if perm == 0 {
		perm = DefaultPerm
	}
	dir := filepath.Dir(path)
	t, err := newTemp(path, "", perm)
	if err != nil {
		return "", targetError("write", path, err)
	}
	defer t.Cleanup()
	if _, err := t.Write(data); err != nil {
		return "", targetError("write", path, err)
	}
	if err := t.Sync(); err != nil {
		return "", targetError("fsync", path, err)
	}
	name := path
	for i := 2; ; i++ {
		err = os.Link(t.Name(), name)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrExist) || i > 10000 {
			return "", targetError("link", name, err)
		}
		name = fmt.Sprintf("%s-%d", path, i)
	}
	if err := t.Cleanup(); err != nil {
		return "", err
	}
	return name, SyncDir(dir)
}

// tempMarker marks the name of every temporary file this package creates,
// so that CleanTemps cannot mistake a user's file for one: the temporary
// file of config.yaml is .config.yaml.mcpkeep-tmp<random digits>.
const tempMarker = ".mcpkeep-tmp"

// MaxName is the longest base name, in bytes, of a file this package
// writes: 255, the longest name the file systems of Linux and macOS take
// (NAME_MAX), less what the name of its temporary file adds ("." before
// it, tempMarker and up to 19 random digits after). A longer name fails at
// the temporary file's creation (ENAMETOOLONG).
const MaxName = 255 - len(".") - len(tempMarker) - 19

// tempName matches the names of the temporary files WriteFile, WriteFiles,
// Backup and CopyNew create: "." + the target's base name + tempMarker + a
// random non-negative int64.
var tempName = regexp.MustCompile(`^\..+` + regexp.QuoteMeta(tempMarker) + `[0-9]+$`)

// newTemp creates the temporary file for path, in dir (path's directory
// when empty) and with mode perm (the umask is not applied). renameio names
// a temporary file "." + the base name of the path it is given + random
// digits: it is given path + tempMarker, so that the name says whose file
// it is. Only the name comes from that path: the callers rename or link the
// file to path themselves.
func newTemp(path, dir string, perm fs.FileMode) (*renameio.PendingFile, error) {
	if dir == "" {
		dir = filepath.Dir(path)
	}
	return renameio.NewPendingFile(filepath.Join(dir, filepath.Base(path)+tempMarker),
		renameio.WithTempDir(dir), renameio.WithStaticPermissions(perm))
}

// IsTemp reports whether name (a base name) has the form of a temporary file
// this package creates: "." + a name + ".mcpkeep-tmp" + digits.
func IsTemp(name string) bool { return tempName.MatchString(name) }

// CleanTemps removes the temporary files in dir (not its subdirectories)
// left behind when a process died during WriteFile, WriteFiles, Backup or
// CopyNew, and returns their paths. It removes only regular files named like
// this package's temporary files (IsTemp): "." + a name + ".mcpkeep-tmp" +
// digits, a name only this package gives a file. Call it only while holding
// the writer's lock, when no write can be in flight.
func CleanTemps(dir string) ([]string, error) {
	return cleanTemps(dir, IsTemp)
}

// CleanTempsOf is CleanTemps for the temporary files of the one file at
// path: it removes those a process that died while writing path left
// beside it, and no other file, so that a writer of one file in a shared
// directory can clean up after itself. Call it only while holding the lock
// every writer of path holds, when no write of path can be in flight.
func CleanTempsOf(path string) ([]string, error) {
	prefix := "." + filepath.Base(path) + tempMarker
	return cleanTemps(filepath.Dir(path), func(name string) bool {
		digits, ok := strings.CutPrefix(name, prefix)
		return ok && IsTemp(name) && strings.Trim(digits, "0123456789") == ""
	})
}

// cleanTemps removes the regular files in dir whose names match, and
// returns their paths.
func cleanTemps(dir string, match func(name string) bool) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var removed []string
	for _, e := range entries {
		if !e.Type().IsRegular() || !match(e.Name()) {
			continue
		}
		p := filepath.Join(dir, e.Name())
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return removed, err
		}
		removed = append(removed, p)
	}
	if len(removed) > 0 {
		if err := SyncDir(dir); err != nil {
			return removed, err
		}
	}
	return removed, nil
}
