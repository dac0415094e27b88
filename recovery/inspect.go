package recovery

import (
	"errors"
	"path/filepath"

	"github.com/mcpkeep/mcpkeep/gitstore"
)

// Inspect is the part of Run's dry run that costs little enough for every
// look at a home, such as `mcpkeep status`: what opening the config
// repository store would repair (git-repair), and each config file Run
// would quarantine or cannot read (corrupt-config, refused-file,
// unreadable), each reported as a dry run of Run reports it. It leaves out
// the rest of the home (temporary files, git locks, the state file,
// checkpoints, directories), merge conflicts and uncommitted changes.
//
// store is the home's config repository, which the caller opened with
// gitstore.Options.ReadOnly and closes; its Repairs are what Inspect
// reports of it. Inspect changes nothing and needs no lock. Of opts it
// uses Home, Validate, MaxFileSize and Logger, as a dry run.
func Inspect(store *gitstore.Store, opts Options) (Report, error) {
	if store == nil {
		return Report{}, errors.New("recovery: Inspect: the store is nil: open the home's config repository read-only first")
	}
	opts.DryRun = true
	r, err := newRunner(opts)
	if err != nil {
		return Report{}, err
	}
	r.repairs(store)
	err = r.checkFiles(store, filepath.Join(r.home, ConfigDir))
	return r.report, err
}
