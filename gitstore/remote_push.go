package gitstore

import (
	"errors"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/revlist"
	"github.com/go-git/go-git/v5/storage/memory"
)

// maxPushWalk bounds the commits pushObjects walks before it asks
// go-git's revlist, which walks the whole history the remote has.
const maxPushWalk = 1000

// pushObjects returns the objects a push of commit n must send to a
// remote whose branch is at expect (ZeroHash: none), copied into memory
// so that they can be sent without the store's lock, and whether n is a
// fast-forward of expect. It walks the commits from n back to expect or
// to a commit of known (commits the remote has had), and for each takes
// the commit and what its tree adds to its first parent's: the objects of
// a change, not of the history. When the walk does not meet expect within
// maxPushWalk commits (a merge whose base is not in known, after a
// restart), it asks go-git's revlist, which walks the history.
func (s *Store) pushObjects(n, expect plumbing.Hash, known []plumbing.Hash) (*memory.ObjectStorage, []plumbing.Hash, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var hashes []plumbing.Hash
	var err error
	ff := true
	switch {
	case expect.IsZero():
		hashes, err = revlist.Objects(s.repo.Storer, []plumbing.Hash{n}, nil)
	default:
		var walked bool
		hashes, walked, err = s.walkNew(n, expect, known)
		if err == nil && !walked {
			ff, err = s.isAncestor(expect, n)
			if err == nil && ff {
				hashes, err = revlist.Objects(s.repo.Storer, []plumbing.Hash{n}, []plumbing.Hash{expect})
			}
		}
	}
	if err != nil || !ff {
		return nil, nil, ff, err
	}
	objs := memory.NewStorage()
	for _, h := range hashes {
		o, err := s.repo.Storer.EncodedObject(plumbing.AnyObject, h)
		if err != nil {
			return nil, nil, false, err
		}
		data, err := objectContents(o)
		if err != nil {
			return nil, nil, false, err
		}
		m := &plumbing.MemoryObject{}
		m.SetType(o.Type())
		if _, err := m.Write(data); err != nil {
			return nil, nil, false, err
		}
		if _, err := objs.SetEncodedObject(m); err != nil {
			return nil, nil, false, err
		}
	}
	return &objs.ObjectStorage, hashes, true, nil
}

// walkNew walks the commits from n that are not expect or in known, and
// returns their objects (each commit, and what its tree adds to its first
// parent's). ok is false when the walk did not meet expect within
// maxPushWalk commits: the caller then cannot tell whether n is a
// fast-forward of expect. The caller holds s.mu.
func (s *Store) walkNew(n, expect plumbing.Hash, known []plumbing.Hash) (hashes []plumbing.Hash, ok bool, err error) {
	stop := map[plumbing.Hash]bool{expect: true}
	for _, k := range known {
		stop[k] = true
	}
	added := map[plumbing.Hash]bool{}
	add := func(h plumbing.Hash) {
		if !added[h] {
			added[h] = true
			hashes = append(hashes, h)
		}
	}
	queue := []plumbing.Hash{n}
	visited := map[plumbing.Hash]bool{}
	met := false
	for len(queue) > 0 {
		c := queue[0]
		queue = queue[1:]
		if visited[c] {
			continue
		}
		visited[c] = true
		if stop[c] {
			met = met || c == expect
			continue
		}
		if len(visited) > maxPushWalk {
			return nil, false, nil
		}
		commit, err := s.repo.CommitObject(c)
		if err != nil {
			return nil, false, err
		}
		add(c)
		parentTree := plumbing.ZeroHash
		if len(commit.ParentHashes) > 0 {
			p, err := s.repo.CommitObject(commit.ParentHashes[0])
			if err != nil {
				return nil, false, err
			}
			parentTree = p.TreeHash
		}
		if err := s.treeAdds(commit.TreeHash, parentTree, add); err != nil {
			return nil, false, err
		}
		queue = append(queue, commit.ParentHashes...)
	}
	return hashes, met, nil
}

// treeAdds passes to add tree h and every object under it that tree old
// (ZeroHash: none) lacks at the same path. The caller holds s.mu.
func (s *Store) treeAdds(h, old plumbing.Hash, add func(plumbing.Hash)) error {
	if h == old {
		return nil
	}
	add(h)
	entries, err := s.treeEntries(h)
	if err != nil {
		return err
	}
	oldEntries, err := s.treeEntries(old)
	if err != nil {
		return err
	}
	byName := make(map[string]object.TreeEntry, len(oldEntries))
	for _, e := range oldEntries {
		byName[e.Name] = e
	}
	for _, e := range entries {
		o, had := byName[e.Name]
		if had && o.Hash == e.Hash {
			continue
		}
		switch e.Mode {
		case filemode.Dir:
			prev := plumbing.ZeroHash
			if had && o.Mode == filemode.Dir {
				prev = o.Hash
			}
			if err := s.treeAdds(e.Hash, prev, add); err != nil {
				return err
			}
		case filemode.Submodule:
			// A commit of another repository: not ours to send.
		default:
			add(e.Hash)
		}
	}
	return nil
}

// isAncestor reports whether commit a is an ancestor of (or is) commit b.
// The caller holds s.mu.
func (s *Store) isAncestor(a, b plumbing.Hash) (bool, error) {
	ca, err := s.repo.CommitObject(a)
	if errors.Is(err, plumbing.ErrObjectNotFound) {
		return false, nil // not here: not in b's history
	}
	if err != nil {
		return false, err
	}
	cb, err := s.repo.CommitObject(b)
	if err != nil {
		return false, err
	}
	return ca.IsAncestor(cb)
}

// aheadBehind counts the commits of HEAD's history the remote (at seen,
// and having had known) lacks, up to maxCount, with the time of the
// oldest, and those of seen's history HEAD lacks. It returns HEAD too.
func (s *Store) aheadBehind(seen plumbing.Hash, known []plumbing.Hash) (ahead, behind int, oldest time.Time, head plumbing.Hash) {
	s.mu.Lock()
	defer s.mu.Unlock()
	head = s.headHash
	if head.IsZero() || head == seen {
		return 0, 0, time.Time{}, head
	}
	stop := map[plumbing.Hash]bool{}
	for _, k := range known {
		stop[k] = true
	}
	if !seen.IsZero() {
		stop[seen] = true
	}
	ahead, met, oldest := s.countFrom(head, stop, seen)
	if seen.IsZero() || met {
		return ahead, 0, oldest, head
	}
	// seen is not in HEAD's history, or the walk stopped before it:
	// count from the merge base.
	if ok, err := s.isAncestor(seen, head); err == nil && ok {
		return ahead, 0, oldest, head
	}
	hc, err1 := s.repo.CommitObject(head)
	sc, err2 := s.repo.CommitObject(seen)
	if err1 != nil || err2 != nil {
		return ahead, 0, oldest, head
	}
	bases, err := hc.MergeBase(sc)
	if err != nil {
		return ahead, 0, oldest, head
	}
	baseStop := map[plumbing.Hash]bool{}
	for _, b := range bases {
		baseStop[b.Hash] = true
	}
	ahead, _, oldest = s.countFrom(head, baseStop, plumbing.ZeroHash)
	behind, _, _ = s.countFrom(seen, baseStop, plumbing.ZeroHash)
	return ahead, behind, oldest, head
}

// countFrom counts the commits reachable from h that are not in stop
// (walking no further than them), up to maxCount, and reports whether it
// met target and the author time of the oldest commit counted. The
// caller holds s.mu.
func (s *Store) countFrom(h plumbing.Hash, stop map[plumbing.Hash]bool, target plumbing.Hash) (int, bool, time.Time) {
	queue := []plumbing.Hash{h}
	visited := map[plumbing.Hash]bool{}
	n, met := 0, false
	var oldest time.Time
	for len(queue) > 0 && n < maxCount {
		c := queue[0]
		queue = queue[1:]
		if visited[c] {
			continue
		}
		visited[c] = true
		if stop[c] {
			met = met || c == target
			continue
		}
		commit, err := s.repo.CommitObject(c)
		if err != nil {
			break
		}
		n++
		if oldest.IsZero() || commit.Committer.When.Before(oldest) {
			oldest = commit.Committer.When
		}
		queue = append(queue, commit.ParentHashes...)
	}
	return n, met, oldest
}
