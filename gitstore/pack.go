package gitstore

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"

	"github.com/mcpkeep/mcpkeep/internal/failpoint"
)

// maxPacks is how many packs Commit lets accumulate before it repacks the
// whole repository into one. A variable for the tests.
var maxPacks = 16

// packWindow is the delta search window, git's default.
const packWindow = 10

// countLoose counts loose objects.
func (s *Store) countLoose() int {
	n := 0
	dirs, _ := os.ReadDir(filepath.Join(s.gitDir, "objects"))
	for _, d := range dirs {
		if len(d.Name()) != 2 || !d.IsDir() {
			continue
		}
		entries, _ := os.ReadDir(filepath.Join(s.gitDir, "objects", d.Name()))
		n += len(entries)
	}
	return n
}

// maybePack packs the loose objects once there are more than
// PackThreshold of them.
//
// It packs only the loose objects, into one new pack, so its cost depends
// on the threshold and not on the length of the history: go-git's
// RepackObjects re-encodes every object of the repository (5 s at 10,000
// commits, and growing with the history), and the Commit that packs would
// stall for that long. Once there are maxPacks packs it does repack
// everything into one, so that lookups stay cheap.
//
// go-git writes a pack through the syncing filesystem (its index first,
// then the pack renamed into place, both fsynced); the loose objects are
// deleted only after that, so a crash at any point loses nothing.
func (s *Store) maybePack() error {
	if s.opts.PackThreshold < 0 || s.loose <= s.opts.PackThreshold {
		return nil
	}
	if err := failpoint.Hit("gitstore.before-pack"); err != nil {
		return err
	}
	packs, err := s.storage.ObjectPacks()
	if err != nil {
		return err
	}
	full := len(packs) >= maxPacks
	if full {
		err = s.repo.RepackObjects(&git.RepackConfig{})
	} else {
		err = s.packLoose()
	}
	if err != nil {
		return err
	}
	// The storage caches the list of packs; start afresh.
	if err := s.reopen(); err != nil {
		return err
	}
	s.loose = s.countLoose()
	s.log.Info("gitstore: packed loose objects", "repo", s.dir, "all", full, "loose_left", s.loose)
	return nil
}

// packLoose writes every loose object into one new pack, then deletes
// them.
func (s *Store) packLoose() error {
	var loose []plumbing.Hash
	err := s.storage.ForEachObjectHash(func(h plumbing.Hash) error {
		loose = append(loose, h)
		return nil
	})
	if err != nil || len(loose) == 0 {
		return err
	}
	w, err := s.storage.PackfileWriter()
	if err != nil {
		return err
	}
	if _, err := packfile.NewEncoder(w, s.storage, false).Encode(loose, packWindow); err != nil {
		w.Close()
		return fmt.Errorf("gitstore: pack %d loose objects in %s: %w", len(loose), s.dir, err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("gitstore: pack %d loose objects in %s: %w", len(loose), s.dir, err)
	}
	for _, h := range loose {
		if err := s.storage.DeleteLooseObject(h); err != nil {
			return err
		}
	}
	return nil
}
