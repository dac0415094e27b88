// Package atomicfile replaces files so readers see the old or the new bytes,
// never a mix, and so a replace that returned nil survives a crash or a power
// cut.
//
// WriteFile writes a temporary file in the target's directory, fsyncs it,
// renames it over the target and fsyncs the directory; WriteFiles does the
// same for several files with their disk writes overlapped. It is built on
// github.com/google/renameio/v2 and adds the directory fsync that renameio
// leaves out. The package does not serialize writers: two processes writing
// one file each leave one whole version, but a read-modify-write needs a lock
// held by the caller (see statefile.Registry).
//
// ReadFile and the YAML and JSON readers read a regular file only, and
// only up to a size limit (DefaultMaxSize unless a Reader sets another):
// they never follow a symbolic link, never wait on a named pipe, and refuse
// anything else, naming it, before reading a byte (*RefusedError). A YAML
// file whose aliases expand to more than MaxAliasValues values is refused
// as corrupt before it is decoded. A *CorruptError's Error quotes what the decoder said, the file's values
// included, for logs; its Summary and Excerpt say what and where without
// quoting more than the start of a line. Linux and macOS only.
package atomicfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/mcpkeep/mcpkeep/internal/barrier"
)

// DefaultPerm is the mode of a file WriteFile creates when perm is 0.
const DefaultPerm fs.FileMode = 0o600

// WriteFile atomically and durably replaces the file at path with data.
//
// If perm is non-zero the file gets exactly perm (the umask is not applied).
// If perm is 0, an existing file keeps its mode and a new one gets
// DefaultPerm. A symbolic link at path is replaced, not followed. On error the
// target is untouched and no temporary file is left behind (unless the
// process dies first; CleanTemps removes those), except after the rename: an
// error fsyncing the directory leaves the new bytes in place, perhaps not
// yet durable.
func WriteFile(path string, data []byte, perm fs.FileMode) error {
	return WriteFiles(File{Path: path, Data: data, Perm: perm})
}

// SyncDir fsyncs the directory dir, making a rename, create or remove of one
// of its entries durable.
func SyncDir(dir string) error {
	return barrier.Sync(barrier.DirOp(dir))
}

// MkdirAll creates dir and any missing parents with mode perm (0700 when
// perm is 0) and fsyncs each parent in which it created an entry, so the new
// directories survive a power cut. perm is applied as given, whatever the
// umask: 0o755 makes directories others may read, 0o777 ones anyone may
// write into. Directories that exist are left as they are.
func MkdirAll(dir string, perm fs.FileMode) error {
	if perm == 0 {
		perm = 0o700
	}
	dir = filepath.Clean(dir)
	fi, err := os.Stat(dir)
	if err == nil {
		if !fi.IsDir() {
			return &fs.PathError{Op: "mkdir", Path: dir, Err: errors.New("exists and is not a directory")}
		}
		return nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	parent := filepath.Dir(dir)
	if parent != dir {
		if err := MkdirAll(parent, perm); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, perm); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil // lost a race to another creator
		}
		return err
	}
	if err := os.Chmod(dir, perm); err != nil { // undo the umask
		return err
	}
	return SyncDir(parent)
}
