package gitstore

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/idxfile"
	"github.com/go-git/go-git/v5/storage/filesystem"

	"github.com/mcpkeep/mcpkeep/internal/failpoint"
)

// packWindow is the delta search window, git's default.
const packWindow = 10

// The packs are kept in a geometric progression, as git repack
// --geometric=2 keeps them: each pack holds at least packFactor times the
// objects of all smaller packs together, so there are few small packs and
// an object is rewritten a few times at most. Unlike git's, the
// progression stops at frozenPacks: a pack of that many times
// PackThreshold objects or more is never merged again, and no merge writes
// more than maxMerge times PackThreshold objects. So the Commit that packs
// costs at most some maxMerge times what packing the loose objects alone
// costs, however long the history; the price is one more pack every
// frozenPacks times PackThreshold objects (some 2,200 commits of a few
// changed files at the default threshold), which lookups go through.
// Variables for the tests.
var (
	packFactor  = 2
	frozenPacks = 4
	maxMerge    = 6
	// When changes pause and more than maxSmallPacks packs hold fewer
	// than frozenPacks times PackThreshold objects, Maintain merges the
	// smallest of them until tidyLeaves are left (tidyUp): merging down
	// to two, not to the cap, makes it one merge every few flushes, not
	// one at every flush.
	maxSmallPacks = 4
	tidyLeaves    = 2
)

// forceMerge makes the next packing merge the smallest packs, frozen ones
// too, up to the maxMerge bound, whether the progression needs it or not:
// the largest merge there can be, for the benchmarks.
var forceMerge = false

// countLoose counts loose objects.
func (s *Store) countLoose() int {
	n := 0
	dirs, _ := os.ReadDir(filepath.Join(s.gitDir, "objects"))
	for _, d := range dirs {
		if !IsFanOut(d.Name()) || !d.IsDir() {
			continue
		}
		entries, _ := os.ReadDir(filepath.Join(s.gitDir, "objects", d.Name()))
		n += len(entries)
	}
	return n
}

// pack is one pack file and how many objects it holds.
type pack struct {
	hash    plumbing.Hash
	objects int
}

// maybePack packs the loose objects once there are more than
// PackThreshold of them: into one new pack, together with the smallest
// packs when the new pack would break the progression (see packFactor).
// Commit calls it when no Maintain runs (which packs instead, with no
// lock held).
//
// writePack writes the pack as writeMemPack does (both files fsynced, its
// index renamed into place first, then the pack); the loose objects and
// the packs it replaces are deleted only after that, so a crash at any
// point loses nothing: at worst some objects are in two places.
func (s *Store) maybePack() error {
	if s.opts.PackThreshold < 0 {
		return nil
	}
	if s.loose < 0 {
		// Counted at the first Commit, not at Open: listing every fan-out
		// directory is the largest part of opening a repository with some
		// history, and a server's start, or mcpkeep status, needs no count.
		s.loose = s.countLoose()
	}
	if s.loose <= s.opts.PackThreshold {
		return nil
	}
	if err := failpoint.Hit("gitstore.before-pack"); err != nil {
		return err
	}
	var loose []plumbing.Hash
	err := s.storage.ForEachObjectHash(func(h plumbing.Hash) error {
		loose = append(loose, h)
		return nil
	})
	if err != nil {
		return err
	}
	packs, err := packsOf(s.gitDir, s.storage)
	if err != nil {
		return err
	}
	merged := rollup(packs, len(loose), s.opts.PackThreshold)
	if len(loose) == 0 && len(merged) < 2 {
		return nil
	}
	written, err := writePack(s.storage, s.dir, loose, merged)
	if err != nil {
		return err
	}
	if err := failpoint.Hit("gitstore.after-pack"); err != nil {
		return err
	}
	for _, h := range loose {
		if err := s.storage.DeleteLooseObject(h); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	for _, p := range merged {
		if p.hash == written {
			continue // the same objects, packed the same way: this is the new pack
		}
		// The .pack goes first: a .idx alone is ignored by go-git and git.
		if err := s.storage.DeleteOldObjectPackAndIndex(p.hash, time.Time{}); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	// The storage caches the list of packs; start afresh.
	if err := s.reopen(); err != nil {
		return err
	}
	s.loose = s.countLoose()
	s.log.Info("gitstore: packed loose objects", "repo", s.dir, "loose", len(loose), "packs_merged", len(merged),
		"packs", len(packs)-len(merged)+1, "loose_left", s.loose)
	return nil
}

// rollup returns the packs to merge with n loose objects into one new pack,
// given every pack, fewest objects first, and the pack threshold: git's
// geometric split (the packs below the point from which they already form
// a progression, then as many more as the new pack would break it), among
// the packs not frozen, trimmed of its largest packs while it would write
// more than maxMerge times threshold objects.
func rollup(packs []pack, n, threshold int) []pack {
	frozen, limit := frozenPacks*threshold, maxMerge*threshold
	var small []pack
	for _, p := range packs {
		if p.objects < frozen || forceMerge {
			small = append(small, p)
		}
	}
	split := 0
	if forceMerge {
		split = len(small)
	}
	for i := len(small) - 1; i > 0 && split == 0; i-- {
		if small[i].objects < packFactor*small[i-1].objects {
			split = i + 1 // small[i-1] and small[i] break the progression
		}
	}
	total := n
	for _, p := range small[:split] {
		total += p.objects
	}
	for ; split < len(small) && small[split].objects < packFactor*total; split++ {
		total += small[split].objects
	}
	for ; split > 0 && total > limit; split-- {
		total -= small[split-1].objects
	}
	return small[:split]
}

// tidyUp returns merged, which rollup chose from packs for n loose
// objects, grown by the next smallest packs not frozen until packing would
// leave at most tidyLeaves packs that are not frozen, within the same
// bound on what a merge writes. The caller calls it when there are more
// than maxSmallPacks. The flushes of the change path write one
// small pack each, whose objects are far fewer than the threshold; without
// this, a home keeps a few dozen of them until they add up to the
// threshold, and every start reads all their indexes.
func tidyUp(packs, merged []pack, n, threshold int) []pack {
	frozen, limit := frozenPacks*threshold, maxMerge*threshold
	var small []pack
	for _, p := range packs {
		if p.objects < frozen {
			small = append(small, p)
		}
	}
	split := len(merged)
	if split > len(small) {
		return merged // forced
	}
	total := n
	for _, p := range merged {
		total += p.objects
	}
	// The new pack is one of the packs left.
	for ; split < len(small) && len(small)-split+1 > tidyLeaves && total+small[split].objects <= limit; split++ {
		total += small[split].objects
	}
	return small[:split]
}

// packsOf lists the packs of the repository st stores, with the number of
// objects each holds, fewest first.
func packsOf(gitDir string, st *filesystem.Storage) ([]pack, error) {
	hashes, err := st.ObjectPacks()
	if err != nil {
		return nil, err
	}
	var out []pack
	for _, h := range hashes {
		idx, err := packIndex(gitDir, h)
		if err != nil {
			return nil, err
		}
		n, err := idx.Count()
		if err != nil {
			return nil, err
		}
		out = append(out, pack{h, int(n)})
	}
	slices.SortFunc(out, func(a, b pack) int {
		if a.objects != b.objects {
			return a.objects - b.objects
		}
		return bytes.Compare(a.hash[:], b.hash[:])
	})
	return out, nil
}

// packIndex reads the index of pack h.
func packIndex(gitDir string, h plumbing.Hash) (*idxfile.MemoryIndex, error) {
	path := filepath.Join(gitDir, "objects", "pack", "pack-"+h.String()+".idx")
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("gitstore: index of a pack: %w", err)
	}
	defer f.Close()
	idx := idxfile.NewMemoryIndex()
	if err := idxfile.NewDecoder(f).Decode(idx); err != nil {
		return nil, fmt.Errorf("gitstore: index of a pack: %s: %w", path, err)
	}
	return idx, nil
}

// writePack writes the loose objects and the objects of the packs merged
// into one new pack (encodeRollup), read through st, durably, and returns
// its hash. dir names the repository in errors.
func writePack(st *filesystem.Storage, dir string, loose []plumbing.Hash, merged []pack) (plumbing.Hash, error) {
	gitDir := filepath.Join(dir, ".git")
	hashes := slices.Clone(loose)
	for _, p := range merged {
		idx, err := packIndex(gitDir, p.hash)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		iter, err := idx.Entries()
		if err != nil {
			return plumbing.ZeroHash, err
		}
		for {
			e, err := iter.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				iter.Close()
				return plumbing.ZeroHash, err
			}
			hashes = append(hashes, e.Hash)
		}
		iter.Close()
	}
	// An object may be both loose and packed, after a crash.
	slices.SortFunc(hashes, func(a, b plumbing.Hash) int { return bytes.Compare(a[:], b[:]) })
	hashes = slices.Compact(hashes)

	pack, idx, name, err := encodeRollup(st, hashes)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("gitstore: pack %d loose objects and %d packs in %s: %w", len(loose), len(merged), dir, err)
	}
	return name, writePackFiles(gitDir, name, pack, idx)
}
