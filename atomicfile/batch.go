package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/google/renameio/v2"

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
}

// errTwice reports a path named twice in one WriteFiles call.
var errTwice = errors.New("named twice in one WriteFiles call")

// WriteFiles replaces each of files as WriteFile would, for about the cost
// of one WriteFile: it writes every temporary file first (on Linux it asks
// the kernel to start writing each one out at once, so their disk writes
// overlap), fsyncs them all at once, renames them in the order given, and
// then fsyncs each of their directories once, all at once. Every file is
// fsynced, as by WriteFile; what is saved is the waiting, one disk write
// after another.
//
// Each file is replaced atomically; the set is not. A crash before
// WriteFiles returns can leave some files replaced and others not, and
// after a power cut not necessarily a prefix of files: where one file must
// not be durable before another (a reference and what it refers to), write
// them in two calls, or keep an undo record (recovery.Begin). When it returns
// nil, every file is durable. On error, files renamed before the error stay
// replaced, the others are untouched and their temporary files removed. A
// path may appear only once.
func WriteFiles(files ...File) error {
	if len(files) == 0 {
		return nil
	}
	seen := make(map[string]bool, len(files))
	for _, f := range files {
		p := filepath.Clean(f.Path)
		if seen[p] {
			return &fs.PathError{Op: "write", Path: f.Path, Err: errTwice}
		}
		seen[p] = true
	}
	if err := failpoint.Hit("atomicfile.before-write"); err != nil {
		return &fs.PathError{Op: "write", Path: files[0].Path, Err: err}
	}
	pending := make([]*renameio.PendingFile, 0, len(files))
	renamed := 0
	defer func() {
		for _, t := range pending[renamed:] {
			t.Cleanup() // closes and removes the temporary file
		}
	}()
	for _, f := range files {
		perm, err := fileMode(f.Path, f.Perm)
		if err != nil {
			return err
		}
		t, err := newTemp(f.Path, f.TempDir, perm)
		if err != nil {
			return targetError("write", f.Path, err)
		}
		pending = append(pending, t)
		if _, err := t.Write(f.Data); err != nil {
			return targetError("write", f.Path, err)
		}
		startWriteback(t.File)
	}
	if err := failpoint.Hit("atomicfile.before-fsync"); err != nil {
		return &fs.PathError{Op: "fsync", Path: files[0].Path, Err: err}
	}
	if err := each(len(pending), func(i int) error {
		if err := pending[i].Sync(); err != nil {
			return targetError("fsync", files[i].Path, err)
		}
		return nil
	}); err != nil {
		return err
	}
	var dirs []string
	for i, t := range pending {
		if err := failpoint.Hit("atomicfile.before-rename"); err != nil {
			return &fs.PathError{Op: "rename", Path: files[i].Path, Err: err}
		}
		// Close and rename here, not with renameio's
		// CloseAtomicallyReplace: that fsyncs the file again, a second
		// flush that made every replace about a third slower than the
		// floor (BenchmarkRawFloor) for nothing, since the Sync above
		// already made the bytes durable.
		if err := t.File.Close(); err != nil {
			return targetError("write", files[i].Path, err)
		}
		if err := os.Rename(t.Name(), files[i].Path); err != nil {
			return targetError("rename", files[i].Path, err)
		}
		renamed++
		if dir := filepath.Dir(files[i].Path); !slices.Contains(dirs, dir) {
			dirs = append(dirs, dir)
		}
	}
	if err := failpoint.Hit("atomicfile.before-dir-fsync"); err != nil {
		return &fs.PathError{Op: "fsync", Path: dirs[0], Err: err}
	}
	return each(len(dirs), func(i int) error { return SyncDir(dirs[i]) })
}

// each runs fn(0), ..., fn(n-1) at once and waits for them all; it returns
// the error of the lowest i that failed. The fsyncs of several files or
// directories, run at once, overlap their waits on the disk (five
// directories after their renames: 718-765 us one after another, 478-571
// us at once, measured here).
func each(n int, fn func(int) error) error {
	if n == 1 {
		return fn(0)
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = fn(i) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
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
