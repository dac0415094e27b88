package gitstore

import (
	"errors"
	"io"
	"io/fs"
	"time"

	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/storage/filesystem"
	"github.com/go-git/go-git/v5/storage/filesystem/dotgit"
)

// overlay is the repository as the store sees it: go-git's storage, with
// the objects the store keeps in memory (staged, in the journal, or in a
// pack its storage has not listed yet) and the refs it knows better than
// the disk (the branch, which the journal moves before a flush writes it;
// and what a ReadOnly Open would have repaired) served first.
// staleTries bounds how many times a ReadOnly store lists the packs again
// to read one object. The first quickTries follow each other at once (a
// flush or a merge that finished between the listing and the read); the
// rest wait staleWait, doubling up to staleWaitMax, for a writer that
// merges pack after pack while the reader reads: about 1.3 s in all before
// an object is said not to be there.
const (
	staleTries   = 35
	quickTries   = 5
	staleWait    = time.Millisecond
	staleWaitMax = 50 * time.Millisecond
)

type overlay struct {
	*filesystem.Storage
	s *Store // its mem, overlay refs and overlayConfig; read under s.mu, as go-git is
}

// EncodedObject returns the object from memory, or from the storage.
func (o overlay) EncodedObject(t plumbing.ObjectType, h plumbing.Hash) (plumbing.EncodedObject, error) {
	if m, ok := o.s.mem[h]; ok {
		if t != plumbing.AnyObject && m.obj.Type() != t {
			return nil, plumbing.ErrObjectNotFound
		}
		return m.obj, nil
	}
	for try := 1; ; try++ {
		obj, err := o.Storage.EncodedObject(t, h)
		if err == nil && o.s.opts.ReadOnly {
			obj, err = o.s.materialize(obj)
		}
		if !o.stale(err, try) {
			return obj, err
		}
	}
}

// materialize reads an object of a ReadOnly store into memory while the
// pack it is in is there: go-git reads a packed object's bytes only when
// asked, from the pack's path, which the writer may have merged away by
// then. An object larger than the files the store versions is left to
// be read when asked (no tree or commit is that large).
func (s *Store) materialize(obj plumbing.EncodedObject) (plumbing.EncodedObject, error) {
	if _, ok := obj.(*plumbing.MemoryObject); ok {
		return obj, nil
	}
	if limit := s.maxFileSize(); limit >= 0 && obj.Size() > limit {
		return obj, nil
	}
	r, err := obj.Reader()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	m := &plumbing.MemoryObject{}
	m.SetType(obj.Type())
	if _, err := io.Copy(m, r); err != nil {
		return nil, err
	}
	return m, nil
}

// stale reports whether err, from the try-th read of an object, may come
// from a list of packs taken before the writer, in another process, wrote
// a pack (a flush: the objects it names are only there) or merged packs
// away (the list may name a pack deleted since); if so, it makes the
// storage list them again, for one more try, up to staleTries. Only a
// ReadOnly store reads beside a writer; the writer lists its own packs
// again as it writes them.
func (o overlay) stale(err error, try int) bool {
	if err == nil || !o.s.opts.ReadOnly || try > staleTries {
		return false
	}
	if errors.Is(err, plumbing.ErrObjectNotFound) || errors.Is(err, dotgit.ErrPackfileNotFound) || errors.Is(err, fs.ErrNotExist) {
		if try > quickTries {
			time.Sleep(min(staleWait<<(try-quickTries-1), staleWaitMax))
		}
		o.Storage.Reindex()
		return true
	}
	return false
}

// HasEncodedObject reports whether the object is in memory or stored.
func (o overlay) HasEncodedObject(h plumbing.Hash) error {
	if _, ok := o.s.mem[h]; ok {
		return nil
	}
	err := o.Storage.HasEncodedObject(h)
	for try := 1; o.stale(err, try); try++ {
		err = o.Storage.HasEncodedObject(h)
	}
	return err
}

// EncodedObjectSize returns the size of the object in memory or stored.
func (o overlay) EncodedObjectSize(h plumbing.Hash) (int64, error) {
	if m, ok := o.s.mem[h]; ok {
		return m.obj.Size(), nil
	}
	n, err := o.Storage.EncodedObjectSize(h)
	for try := 1; o.stale(err, try); try++ {
		n, err = o.Storage.EncodedObjectSize(h)
	}
	return n, err
}

// Reference returns the ref the store knows, or the stored one.
func (o overlay) Reference(name plumbing.ReferenceName) (*plumbing.Reference, error) {
	if r, ok := o.s.overlay[name]; ok {
		return r, nil
	}
	return o.Storage.Reference(name)
}

// Config returns the repaired config, or the stored one.
func (o overlay) Config() (*config.Config, error) {
	if o.s.overlayConfig != nil {
		return o.s.overlayConfig, nil
	}
	return o.Storage.Config()
}
