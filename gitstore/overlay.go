package gitstore

import (
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/storage/filesystem"
)

// overlay is the repository as the store sees it: go-git's storage, with
// the objects the store keeps in memory (staged, in the journal, or in a
// pack its storage has not listed yet) and the refs it knows better than
// the disk (the branch, which the journal moves before a flush writes it;
// and what a ReadOnly Open would have repaired) served first.
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
	return o.Storage.EncodedObject(t, h)
}

// HasEncodedObject reports whether the object is in memory or stored.
func (o overlay) HasEncodedObject(h plumbing.Hash) error {
	if _, ok := o.s.mem[h]; ok {
		return nil
	}
	return o.Storage.HasEncodedObject(h)
}

// EncodedObjectSize returns the size of the object in memory or stored.
func (o overlay) EncodedObjectSize(h plumbing.Hash) (int64, error) {
	if m, ok := o.s.mem[h]; ok {
		return m.obj.Size(), nil
	}
	return o.Storage.EncodedObjectSize(h)
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
