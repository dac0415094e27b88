package gitstore

import (
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/storage/filesystem"
)

// overlay serves the refs and the config a read-only Open would have
// repaired from memory, so that a read-only Store sees the repository as a
// repairing Open would leave it, without writing.
type overlay struct {
	*filesystem.Storage
	refs   map[plumbing.ReferenceName]*plumbing.Reference
	config *config.Config // nil: the stored one
}

// Reference returns the repaired ref for name, or the stored one.
func (o overlay) Reference(name plumbing.ReferenceName) (*plumbing.Reference, error) {
	if r, ok := o.refs[name]; ok {
		return r, nil
	}
	return o.Storage.Reference(name)
}

// Config returns the repaired config, or the stored one.
func (o overlay) Config() (*config.Config, error) {
	if o.config != nil {
		return o.config, nil
	}
	return o.Storage.Config()
}
