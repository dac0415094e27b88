// Package atomicfile replaces files so readers see the old or the new bytes,
// never a mix, and so a replace that returned nil survives a crash or a power
// cut.
//
// WriteFile writes a temporary file in the target's directory, fsyncs it,
// renames it over the target and fsyncs the directory. It is built on
// github.com/google/renameio/v2 and adds the directory fsync that renameio
// leaves out. The package does not serialize writers: two processes writing
// one file each leave one whole version, but a read-modify-write needs a lock
// held by the caller (see statefile.Registry). Linux and macOS only.
package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/google/renameio/v2"

	"github.com/mcpkeep/mcpkeep/internal/failpoint"
)

// DefaultPerm is the mode of a file WriteFile creates when perm is 0.
const DefaultPerm fs.FileMode = 0o600

// WriteFile atomically and durably replaces the file at path with data.
//
// If perm is non-zero the file gets exactly perm (the umask is not applied).
// If perm is 0, an existing file keeps its mode and a new one gets
// DefaultPerm. A symbolic link at path is replaced, not followed. On error the
// target is untouched and no temporary file is left behind, unless the
// process dies first; CleanTemps removes those.
func WriteFile(path string, data []byte, perm fs.FileMode) error {
	dir := filepath.Dir(path)
	opts := []renameio.Option{renameio.WithTempDir(dir)}
	if perm != 0 {
		opts = append(opts, renameio.WithStaticPermissions(perm))
	} else {
		opts = append(opts, renameio.WithExistingPermissions())
	}
	if err := failpoint.Hit("atomicfile.before-write"); err != nil {
		return &fs.PathError{Op: "write", Path: path, Err: err}
	}
	t, err := renameio.NewPendingFile(path, opts...)
	if err != nil {
		return err
	}
	replaced := false
	defer func() {
		if !replaced {
			t.Cleanup() // closes and removes the temporary file
		}
	}()
	if _, err := t.Write(data); err != nil {
		return err
	}
	if err := failpoint.Hit("atomicfile.before-fsync"); err != nil {
		return &fs.PathError{Op: "fsync", Path: t.Name(), Err: err}
	}
	if err := t.Sync(); err != nil {
		return err
	}
	if err := failpoint.Hit("atomicfile.before-rename"); err != nil {
		return &fs.PathError{Op: "rename", Path: path, Err: err}
	}
	// Close and rename here, not with renameio's CloseAtomicallyReplace:
	// that fsyncs the file again, a second flush that made every replace
	// about a third slower than the floor (BenchmarkRawFloor) for nothing,
	// since the Sync above already made the bytes durable.
	if err := t.File.Close(); err != nil {
		return err
	}
	if err := os.Rename(t.Name(), path); err != nil {
		return err
	}
	replaced = true
	if err := failpoint.Hit("atomicfile.before-dir-fsync"); err != nil {
		return &fs.PathError{Op: "fsync", Path: dir, Err: err}
	}
	return SyncDir(dir)
}

// SyncDir fsyncs the directory dir, making a rename, create or remove of one
// of its entries durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("fsync directory %s: %w", dir, err)
	}
	return nil
}

// MkdirAll creates dir and any missing parents with mode perm (0700 when
// perm is 0) and fsyncs each parent in which it created an entry, so the new
// directories survive a power cut.
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
