package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// DefaultMaxSize is the largest file a read of this package reads unless a
// Reader says otherwise: 1 MiB, far more than a config file needs and far
// less than a server's memory.
const DefaultMaxSize int64 = 1 << 20

// Errors a refused read matches: every *RefusedError matches one of them.
var (
	// ErrNotRegular: the path is a symbolic link, a named pipe, a device, a
	// socket or a directory, where a regular file was expected.
	ErrNotRegular = errors.New("atomicfile: not a regular file")
	// ErrTooLarge: the file is larger than the read allows.
	ErrTooLarge = errors.New("atomicfile: file too large")
)

// RefusedError reports a file a read refused before reading a byte of it:
// a path that is not a regular file (Mode holds its type; a symbolic link
// is never followed), or a regular file larger than Limit.
type RefusedError struct {
	Path string      // the refused path, as the caller named it (or the link below Reader.Root that led there)
	Mode fs.FileMode // the type bits of what is there; 0 for a regular file that is too large
	Size int64       // the file's size, when it is too large
	// Limit is the largest size the read allowed, when the file is too
	// large.
	Limit int64

	// Remedy says what to do about the file, as a lower-case phrase. Empty
	// means the generic advice: replace it with a regular file (or make it
	// smaller).
	Remedy string
}

// Kind says what is at Path, as a phrase: "a symbolic link", "a named pipe
// (fifo)", "a device", "a socket", "a directory", or, for a file too large,
// "a regular file".
func (e *RefusedError) Kind() string { return Kind(e.Mode) }

// Kind names the type of a file of mode m as a phrase, as
// RefusedError.Kind does.
func Kind(m fs.FileMode) string {
	switch t := m.Type(); {
	case t&fs.ModeSymlink != 0:
		return "a symbolic link"
	case t&fs.ModeNamedPipe != 0:
		return "a named pipe (fifo)"
	case t&fs.ModeSocket != 0:
		return "a socket"
	case t&fs.ModeDevice != 0:
		return "a device"
	case t&fs.ModeDir != 0:
		return "a directory"
	case t == 0:
		return "a regular file"
	}
	return "not a regular file"
}

// Error names the path, says what is wrong, and what to do.
func (e *RefusedError) Error() string {
	remedy := e.Remedy
	var problem string
	if e.Mode.Type() == 0 {
		problem = fmt.Sprintf("%s is %s bytes, more than the %s a read allows; it was not read", e.Path, size(e.Size), size(e.Limit))
		if remedy == "" {
			remedy = "make it smaller, or raise the limit"
		}
	} else {
		problem = fmt.Sprintf("%s is %s, not a regular file; it was not read", e.Path, e.Kind())
		if e.Mode.Type()&fs.ModeSymlink != 0 {
			problem += " (links are never followed)"
		}
		if remedy == "" {
			remedy = "replace it with a regular file"
		}
	}
	return problem + " (" + remedy + ")"
}

// Unwrap returns ErrTooLarge or ErrNotRegular.
func (e *RefusedError) Unwrap() error {
	if e.Mode.Type() == 0 {
		return ErrTooLarge
	}
	return ErrNotRegular
}

// size writes n with thousands separators.
func size(n int64) string {
	s := strconv.FormatInt(n, 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// Reader reads files the way this package's Read functions do, with the
// limits it sets. Its zero value reads as the package-level functions do.
//
// Every read opens the file with O_NOFOLLOW and O_NONBLOCK, so that a
// symbolic link is not followed and a named pipe cannot block the open;
// checks, on the open file, that it is a regular file of at most MaxSize
// bytes; and only then reads it. Anything else is a *RefusedError naming
// the path. A read never waits on a writer and never returns the bytes of
// a file a link points to.
type Reader struct {
	// MaxSize is the largest file read, in bytes: 0 means DefaultMaxSize, a
	// negative value no limit.
	MaxSize int64
	// Root, if set, is a directory every path read must lie in; a
	// relative path is then relative to Root, not to the current
	// directory, and must not climb out of it (".."). Each path
	// component below Root is then opened with O_NOFOLLOW too, so a link to
	// a directory (config/personas -> /etc) cannot lead a read out of the
	// tree: a link anywhere below Root is a *RefusedError naming it. Root
	// itself and the directories above it are followed: they are the
	// caller's choice, not the tree's contents.
	Root string
}

// ReadFile returns the bytes of the regular file at path, as Reader's
// documentation says: a symbolic link, a named pipe, a device, a socket, a
// directory or a file larger than DefaultMaxSize is a *RefusedError, and a
// missing file an error matching fs.ErrNotExist.
func ReadFile(path string) ([]byte, error) { return Reader{}.ReadFile(path) }

// ReadFile returns the bytes of the regular file at path; see Reader.
func (r Reader) ReadFile(path string) ([]byte, error) {
	data, _, err := r.readFile(path)
	return data, err
}

// ReadOwned is ReadFile that also returns the owner's uid and the
// permission bits of the file it read, from the open file's fstat: what
// was read, not what may be at path by the time the caller looks. For a
// secret, which only its owner may read.
func (r Reader) ReadOwned(path string) (data []byte, uid int, perm fs.FileMode, err error) {
	data, st, err := r.readFile(path)
	if err != nil {
		return nil, 0, 0, err
	}
	return data, int(st.Uid), fs.FileMode(st.Mode) & fs.ModePerm, nil
}

// readFile is ReadFile, which also returns what the open file's fstat
// said of it before it was read.
func (r Reader) readFile(path string) ([]byte, *unix.Stat_t, error) {
	fd, err := r.open(path)
	if err != nil {
		return nil, nil, err
	}
	defer unix.Close(fd)
	st := new(unix.Stat_t)
	if err := unix.Fstat(fd, st); err != nil {
		return nil, nil, &fs.PathError{Op: "fstat", Path: path, Err: err}
	}
	mode := modeType(uint32(st.Mode))
	if !mode.IsRegular() {
		return nil, nil, &RefusedError{Path: path, Mode: mode}
	}
	limit := r.limit()
	if limit >= 0 && st.Size > limit {
		return nil, nil, &RefusedError{Path: path, Size: st.Size, Limit: limit}
	}
	// Read to the end, but at most one byte more than the limit: a file
	// that grew since the fstat is refused, not read whole.
	data := make([]byte, 0, st.Size+1)
	for {
		if len(data) == cap(data) {
			data = append(data, 0)[:len(data)]
		}
		buf := data[len(data):cap(data)]
		if limit >= 0 && int64(len(data)+len(buf)) > limit+1 {
			buf = buf[:limit+1-int64(len(data))]
		}
		n, err := unix.Read(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, nil, &fs.PathError{Op: "read", Path: path, Err: err}
		}
		if n == 0 {
			break
		}
		data = data[:len(data)+n]
		if limit >= 0 && int64(len(data)) > limit {
			return nil, nil, &RefusedError{Path: path, Size: int64(len(data)), Limit: limit}
		}
	}
	return data, st, nil
}

func (r Reader) limit() int64 {
	switch {
	case r.MaxSize == 0:
		return DefaultMaxSize
	case r.MaxSize < 0:
		return -1
	}
	return r.MaxSize
}

// open opens path for reading without following a symbolic link: the last
// component always, and, with Root, every component below Root. What is
// there is looked at first, without opening it, so that a fifo, a device
// (whose open may do something) or a socket is refused as what it is.
func (r Reader) open(path string) (int, error) {
	dirfd, name, closeDir, err := r.parent(path)
	if err != nil {
		return -1, err
	}
	defer closeDir()
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return -1, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	if mode := modeType(uint32(st.Mode)); !mode.IsRegular() {
		return -1, &RefusedError{Path: path, Mode: mode}
	}
	// O_NONBLOCK: should a fifo replace the file after the look, the open
	// does not wait for a writer, and the fstat after it refuses it.
	fd, err := openat(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC)
	if err != nil {
		if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENXIO) || errors.Is(err, unix.EOPNOTSUPP) {
			// Replaced by a link (or a socket) since the look.
			if unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
				if mode := modeType(uint32(st.Mode)); !mode.IsRegular() {
					return -1, &RefusedError{Path: path, Mode: mode}
				}
			}
		}
		return -1, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	return fd, nil
}

// parent opens the directory path's last component is in and returns it
// with that component's name. With Root, a relative path is relative to
// Root. Without Root it is the current directory's
// AT_FDCWD and path itself, every component but the last followed as
// open(2) follows it.
func (r Reader) parent(path string) (dirfd int, name string, closeDir func(), err error) {
	nop := func() {}
	if r.Root == "" {
		return unix.AT_FDCWD, path, nop, nil
	}
	rel := filepath.Clean(path) // a relative path is relative to Root
	if filepath.IsAbs(path) {
		rel, err = filepath.Rel(r.Root, path)
	}
	if err != nil || !filepath.IsLocal(rel) {
		return 0, "", nop, &fs.PathError{Op: "open", Path: path,
			Err: fmt.Errorf("not inside %s: give a path inside it, absolute or relative to it", r.Root)}
	}
	dirfd, err = openat(unix.AT_FDCWD, r.Root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC)
	if err != nil {
		return 0, "", nop, &fs.PathError{Op: "open", Path: r.Root, Err: err}
	}
	parts := strings.Split(filepath.ToSlash(rel), "/")
	dir := r.Root
	for _, part := range parts[:len(parts)-1] {
		dir = filepath.Join(dir, part)
		next, err := openat(dirfd, part, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC)
		if err != nil {
			var st unix.Stat_t
			if serr := unix.Fstatat(dirfd, part, &st, unix.AT_SYMLINK_NOFOLLOW); serr == nil {
				if mode := modeType(uint32(st.Mode)); !mode.IsDir() {
					unix.Close(dirfd)
					return 0, "", nop, &RefusedError{Path: dir, Mode: mode}
				}
			}
			unix.Close(dirfd)
			return 0, "", nop, &fs.PathError{Op: "open", Path: dir, Err: err}
		}
		unix.Close(dirfd)
		dirfd = next
	}
	fd := dirfd
	return fd, parts[len(parts)-1], func() { unix.Close(fd) }, nil
}

// openat is unix.Openat, retried on EINTR, with its error as a
// syscall.Errno.
func openat(dirfd int, name string, flags int) (int, error) {
	for {
		fd, err := unix.Openat(dirfd, name, flags, 0)
		if err != unix.EINTR {
			return fd, err
		}
	}
}

// modeType converts the st_mode of a stat to an fs.FileMode's type bits.
func modeType(m uint32) fs.FileMode {
	switch m & unix.S_IFMT {
	case unix.S_IFREG:
		return 0
	case unix.S_IFDIR:
		return fs.ModeDir
	case unix.S_IFLNK:
		return fs.ModeSymlink
	case unix.S_IFIFO:
		return fs.ModeNamedPipe
	case unix.S_IFSOCK:
		return fs.ModeSocket
	case unix.S_IFCHR:
		return fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFBLK:
		return fs.ModeDevice
	}
	return fs.ModeIrregular
}
