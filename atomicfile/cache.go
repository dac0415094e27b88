package atomicfile

import (
	"bytes"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// DefaultCacheEntries is how many files a Cache keeps unless its
// MaxEntries says otherwise.
const DefaultCacheEntries = 1024

// settleTime is how old a file's change time must be, at the moment a
// read of it begins, for a Cache to trust that an unchanged lstat means
// unchanged bytes: longer than the tick in which any file system this
// package runs on records change times (a jiffy on Linux, a second on
// HFS+, two on FAT).
const settleTime = 2 * time.Second

// Cache keeps what Decode made of each file read through Reader, and gives
// it again, without reading or decoding the file, for as long as the file
// is unchanged. A read of a config file on every call of a tool costs a
// dozen system calls and a strict parse; a Cache's costs one lstat per
// path component below Reader.Root while the file is unchanged.
//
// Never stale: every Read looks at the file on disk first. A file counts
// as unchanged while lstat says the same of it as when its bytes were
// read: device and inode, mode, size, modification and change times. Any
// write changes the change time, and a replace (a rename over the file,
// as WriteFile does) the inode too, so a change by this process, by
// another, or by hand in an editor is read at the next Read. File systems
// record change times in ticks, though, so a file rewritten in place at
// the same size within the tick of its previous change could look
// unchanged: a Cache trusts lstat only for a file whose change time was at
// least two seconds old when its bytes were read, and reads a file
// changed more recently again at each Read, decoding it again only if its
// bytes differ (git's "racily clean" index entries are handled the same
// way). The clock being set back can only make it read more.
//
// Never weaker than Reader: the lstat of each component refuses, as a
// read does, a symbolic link, a named pipe, anything but a regular file,
// and a file grown past MaxSize; for any such path Read reads it through
// Reader and returns the error that read gives, never a cached value.
// Errors are not cached, and a file that fails gives up its entry.
//
// A Cache keeps at most MaxEntries files (DefaultCacheEntries when 0),
// dropping another entry to make room, and with each the decoded value,
// plus the file's bytes while its change time is recent. It is safe for
// concurrent use; it must not be copied, nor its fields changed, after
// the first Read.
type Cache[T any] struct {
	// Reader reads the files, with its limits and Root.
	Reader Reader
	// Decode turns a file's bytes into the value Read returns, such as a
	// ParseYAMLStrict into a struct. It must depend on path and data
	// alone: a value it made is given again for the same bytes. Its
	// error is returned as it is. Required.
	Decode func(path string, data []byte) (T, error)
	// Clone returns a copy of a value that the caller may change without
	// changing the cached one: a struct holding a map or a slice needs
	// one. Nil returns the cached value itself, for a T that holds no
	// reference (strings and numbers only).
	Clone func(T) T
	// MaxEntries is the most files kept; 0 means DefaultCacheEntries.
	MaxEntries int

	mu      sync.Mutex
	entries map[string]*cacheEntry[T]
	now     func() time.Time // time.Now; tests move it
	reads   int              // files read from disk, for tests
}

// cacheEntry is what a Cache keeps of one file.
type cacheEntry[T any] struct {
	id    fileID
	value T
	// data holds the bytes value was decoded from while the entry is not
	// settled; nil once it is.
	data    []byte
	settled bool // id was settleTime old when the bytes were read: trust it
}

// fileID is what lstat says of a file that a change of its bytes changes.
type fileID struct {
	dev, ino     uint64
	mode         uint32
	size         int64
	mtime, ctime int64 // nanoseconds since the epoch
}

func idOf(st *unix.Stat_t) fileID {
	return fileID{dev: uint64(st.Dev), ino: uint64(st.Ino), mode: uint32(st.Mode), size: st.Size,
		mtime: st.Mtim.Nano(), ctime: st.Ctim.Nano()}
}

// errNoDecode is Read's error when Cache.Decode is nil.
var errNoDecode = errors.New("atomicfile: Cache.Read: Cache.Decode is nil; set it to the function that turns a file's bytes into a value")

// Read returns the value Decode makes of the file at path, from the cache
// if the file is unchanged since it was decoded; see Cache. Its errors are
// Reader.ReadFile's and Decode's.
func (c *Cache[T]) Read(path string) (T, error) {
	var zero T
	if c.Decode == nil {
		return zero, errNoDecode
	}
	c.mu.Lock()
	e := c.entries[path]
	c.mu.Unlock()
	if e != nil && e.settled {
		if st, ok := c.Reader.lstat(path); ok && idOf(&st) == e.id && st.Size <= c.Reader.maxSize() {
			return c.clone(e.value), nil
		}
	}
	start := c.clock()
	data, st, err := c.Reader.readFile(path)
	if err != nil {
		c.forget(path)
		return zero, err
	}
	n := &cacheEntry[T]{id: idOf(st), settled: start.Sub(time.Unix(0, st.Ctim.Nano())) >= settleTime}
	if e != nil && e.data != nil && bytes.Equal(e.data, data) {
		n.value = e.value // the same bytes decode to the same value
	} else if n.value, err = c.Decode(path, data); err != nil {
		c.forget(path)
		return zero, err
	}
	if !n.settled {
		n.data = data
	}
	c.store(path, n)
	return c.clone(n.value), nil
}

func (c *Cache[T]) clone(v T) T {
	if c.Clone == nil {
		return v
	}
	return c.Clone(v)
}

func (c *Cache[T]) clock() time.Time {
	if c.now != nil {
		return c.now()
	}
	return time.Now()
}

// store keeps e for path, dropping another entry if the cache is full.
func (c *Cache[T]) store(path string, e *cacheEntry[T]) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reads++
	if c.entries == nil {
		c.entries = make(map[string]*cacheEntry[T])
	}
	max := c.MaxEntries
	if max <= 0 {
		max = DefaultCacheEntries
	}
	if _, ok := c.entries[path]; !ok && len(c.entries) >= max {
		for p := range c.entries {
			delete(c.entries, p)
			break
		}
	}
	c.entries[path] = e
}

// forget drops the entry of path, which failed.
func (c *Cache[T]) forget(path string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reads++
	delete(c.entries, path)
}

// maxSize is the largest file r reads, or the largest int64 for none.
func (r Reader) maxSize() int64 {
	if l := r.limit(); l >= 0 {
		return l
	}
	return 1<<63 - 1
}

// lstat returns what lstat says of path, and whether path is a regular
// file reached, below Root, through directories only: what open would
// accept. ok is false for anything a read refuses or fails on, and for
// any error of lstat; the caller then reads the file for its error.
func (r Reader) lstat(path string) (st unix.Stat_t, ok bool) {
	if r.Root != "" {
		rel, err := filepath.Rel(r.Root, path)
		if err != nil || !filepath.IsLocal(rel) {
			return st, false
		}
		// The components as the read opens them, not path's own
		// spelling: "a/../b" must not walk through a link a.
		dir := r.Root
		parts := strings.Split(rel, string(filepath.Separator))
		for _, part := range parts[:len(parts)-1] {
			dir = filepath.Join(dir, part)
			if lstat(dir, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
				return st, false
			}
		}
		path = filepath.Join(dir, parts[len(parts)-1])
	}
	if lstat(path, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return st, false
	}
	return st, true
}

// lstat is unix.Lstat, retried on EINTR.
func lstat(path string, st *unix.Stat_t) error {
	for {
		if err := unix.Lstat(path, st); err != unix.EINTR {
			return err
		}
	}
}
