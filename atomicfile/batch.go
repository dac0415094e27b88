package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/google/renameio/v2"

	"github.com/mcpkeep/mcpkeep/internal/barrier"
	"github.com/mcpkeep/mcpkeep/internal/failpoint"
)

// File is one file of a WriteFiles call: the arguments of one WriteFile.
type File struct {
	Path string      // the file to replace
	Data []byte      // its new bytes
	Perm fs.FileMode // as WriteFile's perm: 0 keeps an existing file's mode
	// TempDir, when not empty, is where the temporary file is made instead
	// of Path's directory; it must be on Path's file system. Only Path's
	// directory is fsynced after the rename, so a crash may leave the
	// temporary file in TempDir, where CleanTemps(TempDir) finds it. For
	// writers of many directories that want their leftovers in one place
	// (gitstore makes its loose objects' in objects/, not in each of 256
	// fan-out directories it would otherwise have to search at every start).
	TempDir string
	// NoSync skips this file's fsyncs: the file is replaced atomically
	// (a reader sees the old or the new bytes) but a power cut may undo
	// the replace or leave the new file torn. For caches that are checked
	// and rebuilt from other data (gitstore's index).
	NoSync bool
}

// errTwice reports a path named twice in one WriteFiles call.
var errTwice = errors.New("named twice in one WriteFiles call")

// WriteFiles replaces each of files as WriteFile would, for about the cost
// of one WriteFile: it writes every temporary file first (on Linux it asks
// the kernel to start writing each one out at once, so their disk writes
// overlap), fsyncs them all at once, renames them in the order given, and
// then fsyncs each of their directories once, all at once. Every file is
// fsynced, as by WriteFile, but those marked NoSync; what is saved is the
// waiting, one disk write after another.
//
// Each file is replaced atomically; the set is not. A crash before
// WriteFiles returns can leave some files replaced and others not, and
// after a power cut not necessarily a prefix of files: where one file must
// not be durable before another (a reference and what it refers to), write
// them in two calls, or keep an undo record (recovery.Begin). When it returns
// nil, every file is durable. On error, files renamed before the error stay
// replaced, the others are untouched and their temporary files removed. A
// path may appear only once.
//
// WriteFiles is Prepare, Sync, Rename and SyncDirs; a caller that must do
// something between those steps calls them itself.
func WriteFiles(files ...File) error {
	if len(files) == 0 {
		return nil
	}
	b, err := Prepare(files...)
	if err != nil {
		return err
	}
	defer b.Cleanup()
	if err := b.Sync(); err != nil {
		return err
	}
	if err := b.Rename(); err != nil {
		return err
	}
	return b.SyncDirs()
}

// A Batch is a WriteFiles in steps: Prepare writes the temporary files,
// Sync makes them durable, Rename puts them in place and SyncDirs makes the
// renames durable. Between the steps the caller may do its own work, and
// Sync and SyncDirs take more files and directories to fsync in the same
// barrier (gitstore fsyncs its journal with the temporary files, so that
// one wait on the disk covers both). Cleanup removes whatever temporary
// file was not renamed; call it when done, after an error too. A Batch is
// for one goroutine.
type Batch struct {
	files   []File
	pending []*renameio.PendingFile
	renamed int
	dirs    []string // directories of renamed files, in order of first rename
}

// Prepare checks files (a path may appear only once) and writes the
// temporary file of each, without fsyncing it. On error it removes what it
// wrote.
func Prepare(files ...File) (*Batch, error) {
	seen := make(map[string]bool, len(files))
	for _, f := range files {
		p := filepath.Clean(f.Path)
		if seen[p] {
			return nil, &fs.PathError{Op: "write", Path: f.Path, Err: errTwice}
		}
		seen[p] = true
	}
	if len(files) == 0 {
		return &Batch{}, nil
	}
	if err := failpoint.Hit("atomicfile.before-write"); err != nil {
		return nil, &fs.PathError{Op: "write", Path: files[0].Path, Err: err}
	}
	b := &Batch{files: files, pending: make([]*renameio.PendingFile, 0, len(files))}
	for _, f := range files {
		perm, err := fileMode(f.Path, f.Perm)
		if err != nil {
			b.Cleanup()
			return nil, err
		}
		t, err := newTemp(f.Path, f.TempDir, perm)
		if err != nil {
			b.Cleanup()
			return nil, targetError("write", f.Path, err)
		}
		b.pending = append(b.pending, t)
		if _, err := t.Write(f.Data); err != nil {
			b.Cleanup()
			return nil, targetError("write", f.Path, err)
		}
		if !f.NoSync {
			startWriteback(t.File)
		}
	}
	return b, nil
}

// Sync fsyncs every temporary file (but those of NoSync files) and every
// file of also (a directory opened with os.Open is fsynced too), at once:
// one barrier. An error names the file whose fsync failed (the target, for
// a temporary file).
func (b *Batch) Sync(also ...*os.File) error {
	if len(b.files) > 0 {
		if err := failpoint.Hit("atomicfile.before-fsync"); err != nil {
			return &fs.PathError{Op: "fsync", Path: b.files[0].Path, Err: err}
		}
	}
	var ops []barrier.Op
	for i, t := range b.pending {
		if !b.files[i].NoSync {
			ops = append(ops, barrier.Op{File: t.File, Path: b.files[i].Path})
		}
	}
	for _, f := range also {
		ops = append(ops, barrier.FileOp(f))
	}
	return barrier.Sync(ops...)
}

// Rename closes each temporary file and renames it over its target, in the
// order given to Prepare. On error the files renamed before it stay
// replaced; Cleanup removes the others' temporary files.
func (b *Batch) Rename() error {
	for i := b.renamed; i < len(b.pending); i++ {
		t, f := b.pending[i], b.files[i]
		if err := failpoint.Hit("atomicfile.before-rename"); err != nil {
			return &fs.PathError{Op: "rename", Path: f.Path, Err: err}
		}
		// Close and rename here, not with renameio's
		// CloseAtomicallyReplace: that fsyncs the file again, a second
		// flush that made every replace about a third slower than the
		// floor (BenchmarkRawFloor) for nothing, since Sync already made
		// the bytes durable.
		if err := t.File.Close(); err != nil {
			return targetError("write", f.Path, err)
		}
		if err := os.Rename(t.Name(), f.Path); err != nil {
			return targetError("rename", f.Path, err)
		}
		b.renamed++
		if dir := filepath.Dir(f.Path); !f.NoSync && !slices.Contains(b.dirs, dir) {
			b.dirs = append(b.dirs, dir)
		}
	}
	return nil
}

// Dirs returns the directories of the files renamed so far (but NoSync
// files), each once: what SyncDirs fsyncs, for a caller that fsyncs them
// in a barrier of its own.
func (b *Batch) Dirs() []string { return slices.Clone(b.dirs) }

// SyncDirs fsyncs the directory of every renamed file (but NoSync files)
// and every directory of also, each once, at once: one barrier.
func (b *Batch) SyncDirs(also ...string) error {
	dirs := slices.Clone(b.dirs)
	for _, d := range also {
		if !slices.Contains(dirs, d) {
			dirs = append(dirs, d)
		}
	}
	if len(dirs) == 0 {
		return nil
	}
	if err := failpoint.Hit("atomicfile.before-dir-fsync"); err != nil {
		return &fs.PathError{Op: "fsync", Path: dirs[0], Err: err}
	}
	ops := make([]barrier.Op, len(dirs))
	for i, d := range dirs {
		ops[i] = barrier.DirOp(d)
	}
	return barrier.Sync(ops...)
}

// Cleanup closes and removes the temporary files not renamed. It is
// idempotent.
func (b *Batch) Cleanup() {
	for _, t := range b.pending[b.renamed:] {
		t.Cleanup()
	}
	b.pending = b.pending[:b.renamed]
}

// fileMode returns the mode WriteFile gives the file at path, as it
// documents: perm when it is not 0, else the mode of the regular file at
// path (a symbolic link is replaced, not followed), else DefaultPerm.
func fileMode(path string, perm fs.FileMode) (fs.FileMode, error) {
	if perm != 0 {
		return perm, nil
	}
	fi, err := os.Lstat(path)
	switch {
	case err == nil && fi.Mode().IsRegular():
		return fi.Mode().Perm(), nil
	case err == nil, errors.Is(err, fs.ErrNotExist):
		return DefaultPerm, nil
	}
	return 0, err
}

// targetError turns err, from an operation on the temporary file of target
// (or its rename), into a *fs.PathError naming target: the file the caller
// asked for, not the random name of a temporary file it never heard of.
// It keeps the cause, so the result matches what err matched
// (fs.ErrNotExist, syscall.ENOSPC, ...), and says what to do when the
// directory is missing or not writable.
func targetError(op, target string, err error) error {
	switch e := err.(type) {
	case *fs.PathError:
		err = e.Err
	case *os.LinkError:
		err = e.Err
	}
	if op == "write" {
		switch {
		case errors.Is(err, fs.ErrNotExist):
			err = fmt.Errorf("its directory does not exist (create it first): %w", err)
		case errors.Is(err, fs.ErrPermission):
			err = fmt.Errorf("its directory is not writable, and a replace creates a file there: %w", err)
		}
	}
	return &fs.PathError{Op: op, Path: target, Err: err}
}
