package gitstore

import (
	"bytes"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"

	"github.com/go-git/go-billy/v5"

	"github.com/mcpkeep/mcpkeep/atomicfile"
	"github.com/mcpkeep/mcpkeep/internal/barrier"
)

// syncFS is a billy filesystem for go-git's storage that makes what go-git
// writes durable: a file written through it is fsynced when closed, a
// directory is fsynced after a rename into it, and a directory it creates
// is fsynced into its parent. go-git alone calls fsync zero times, so a
// power cut can leave empty loose objects.
//
// It fsyncs no more than that: go-git writes every object and pack to a
// temporary file and renames it into place, so the temporary file's own
// directory entry need not be durable (a power cut may leave the temporary
// file, which Open removes), and neither need the rename's source
// directory.
type syncFS struct {
	billy.Filesystem
}

func (s syncFS) abs(name string) string {
	if filepath.IsAbs(name) {
		return name
	}
	return filepath.Join(s.Root(), filepath.FromSlash(name))
}

func (s syncFS) Create(name string) (billy.File, error) {
	f, err := s.Filesystem.Create(name)
	if err != nil {
		return nil, err
	}
	return &syncFile{File: f, fs: s, name: name, created: true}, nil
}

// Open opens name for reading, as OpenFile does: a pack index is read
// whole.
func (s syncFS) Open(name string) (billy.File, error) {
	return s.OpenFile(name, os.O_RDONLY, 0)
}

// OpenFile opens name; a file opened for writing is fsynced when closed,
// and a pack index opened for reading is read whole at once (readWhole).
func (s syncFS) OpenFile(name string, flag int, perm os.FileMode) (billy.File, error) {
	f, err := s.Filesystem.OpenFile(name, flag, perm)
	if err != nil {
		return f, err
	}
	if flag&(os.O_WRONLY|os.O_RDWR) == 0 {
		if isPackIndex(name) {
			size := int64(-1)
			if fi, err := s.Filesystem.Stat(name); err == nil && fi.Mode().IsRegular() {
				size = fi.Size()
			}
			return readWhole(f, size)
		}
		return f, nil
	}
	return &syncFile{File: f, fs: s, name: name, created: flag&os.O_CREATE != 0}, nil
}

// isPackIndex reports whether name is a pack's index, objects/pack/*.idx.
func isPackIndex(name string) bool {
	name = filepath.ToSlash(name)
	return path.Ext(name) == ".idx" && path.Base(path.Dir(name)) == "pack"
}

// readWhole reads f to its end, closes it, and returns a read-only file of
// its bytes. go-git decodes a pack index with reads of 4 to 20 bytes, a
// system call each on a file without a buffer: 6,000 of them before the
// first answer of a server on a home with 1,000 commits in 7 packs. It
// keeps the whole index in memory once decoded anyway. The buffer is sized
// from size, the file's size if known (else -1): growing it as io.ReadAll
// does would allocate the index some twice over, 170 KB more at 1,000
// commits, enough to bring the first garbage collection into a server's
// start.
func readWhole(f billy.File, size int64) (billy.File, error) {
	var buf bytes.Buffer
	if size >= 0 && size < 1<<30 {
		buf.Grow(int(size) + bytes.MinRead) // room to read the end without growing
	}
	_, err := buf.ReadFrom(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	return &memFile{name: f.Name(), Reader: bytes.NewReader(buf.Bytes())}, nil
}

// memFile is a file read whole into memory, for reading only.
type memFile struct {
	name string
	*bytes.Reader
}

func (f *memFile) Name() string { return f.name }

func (f *memFile) Write([]byte) (int, error) {
	return 0, &fs.PathError{Op: "write", Path: f.name, Err: fs.ErrPermission}
}

func (f *memFile) Truncate(int64) error {
	return &fs.PathError{Op: "truncate", Path: f.name, Err: fs.ErrPermission}
}

func (f *memFile) Close() error  { return nil }
func (f *memFile) Lock() error   { return nil }
func (f *memFile) Unlock() error { return nil }

// TempFile creates a temporary file that is fsynced when closed; its
// directory is not: it is renamed or removed.
func (s syncFS) TempFile(dir, prefix string) (billy.File, error) {
	if err := s.MkdirAll(dir, dirPerm); err != nil {
		return nil, err
	}
	f, err := s.Filesystem.TempFile(dir, prefix)
	if err != nil {
		return nil, err
	}
	return &syncFile{File: f, fs: s, name: f.Name()}, nil
}

// Rename renames from to to, creating to's directory durably if need be,
// and fsyncs to's directory.
func (s syncFS) Rename(from, to string) error {
	dir := path.Dir(filepath.ToSlash(to))
	if err := s.MkdirAll(dir, dirPerm); err != nil {
		return err
	}
	if err := s.Filesystem.Rename(from, to); err != nil {
		return err
	}
	return atomicfile.SyncDir(s.abs(dir))
}

// MkdirAll creates name and its missing parents durably, 0700 whatever
// perm asks: go-git asks for os.ModePerm (0777), counting on the umask to
// take bits away, but atomicfile.MkdirAll gives a directory its perm
// exactly, umask or not, so go-git's objects, refs and their info, pack,
// heads and tags were made writable by every user.
func (s syncFS) MkdirAll(name string, _ os.FileMode) error {
	return atomicfile.MkdirAll(s.abs(name), dirPerm)
}

func (s syncFS) Chroot(p string) (billy.Filesystem, error) {
	fs, err := s.Filesystem.Chroot(p)
	if err != nil {
		return nil, err
	}
	return syncFS{fs}, nil
}

// syncFile fsyncs on Close if it was written, and fsyncs its directory if
// it created the file.
type syncFile struct {
	billy.File
	fs      syncFS
	name    string
	created bool
	written bool
}

func (f *syncFile) Write(p []byte) (int, error) {
	f.written = true
	return f.File.Write(p)
}

func (f *syncFile) Truncate(size int64) error {
	f.written = true
	return f.File.Truncate(size)
}

func (f *syncFile) Close() error {
	if err := f.File.Close(); err != nil {
		return err
	}
	if f.written {
		if err := fsyncFile(f.fs.abs(f.name)); err != nil {
			return err
		}
	}
	if f.created {
		return atomicfile.SyncDir(filepath.Dir(f.fs.abs(f.name)))
	}
	return nil
}

// fsyncFile fsyncs the file at path through a new descriptor: the files
// osfs hands out are wrapped by billy's chroot helper, which hides Sync,
// so asking the billy.File for it silently synced nothing (a power cut
// then left every loose object empty). A variable for the tests.
var fsyncFile = func(path string) error {
	return barrier.Sync(barrier.Op{Path: path})
}

// withoutPacks is syncFS with the packs named in gone (base names of .pack
// files) left out of the listing of objects/pack, which is how go-git
// finds packs: the view of a store that is about to delete them.
type withoutPacks struct {
	syncFS
	gone map[string]bool
}

func (w withoutPacks) ReadDir(name string) ([]os.FileInfo, error) {
	infos, err := w.syncFS.ReadDir(name)
	if err != nil || path.Clean(filepath.ToSlash(name)) != "objects/pack" {
		return infos, err
	}
	return slices.DeleteFunc(infos, func(fi os.FileInfo) bool { return w.gone[fi.Name()] }), nil
}
