package gitstore

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// replay takes the journal's records back into the store, as Open must
// (DESIGN.md, "Issue 20: the change path"): it builds their objects again
// in memory, moves HEAD to the last of their commits when HEAD names one
// of the chain (or its base), and, unless the store is read-only, puts
// the files of the last record in place when they are not. The caller
// flushes them to the repository. It returns the records it took, for the
// flush.
func (s *Store) replay() ([]*appliedRecord, error) {
	recs, _, err := readJournal(s.gitDir)
	if err != nil || len(recs) == 0 {
		return nil, err
	}
	ref := s.headHash
	var chain []*appliedRecord
	inChain := map[plumbing.Hash]bool{}
	var prev plumbing.Hash
	var last []*Staged // the commits of the last two records, which may not be in place
	for i, r := range recs {
		base := plumbing.ZeroHash
		if r.Base != "" {
			base = plumbing.NewHash(r.Base)
		}
		if i > 0 && base != prev {
			// A record that does not follow the one before: records of
			// an older generation that a power cut kept after a flush
			// emptied their file. Their commits are in the repository.
			if _, err := s.repo.CommitObject(base); err != nil {
				s.repaired("ignored journal records from %s on: their base %s is not in the repository", r.Base, base)
				break
			}
			chain, last = nil, nil
			clear(inChain)
		}
		ar, commits, err := s.rebuild(r, base)
		if err != nil {
			s.repaired("ignored journal records from sequence %d on: %v", r.Seq, err)
			break
		}
		inChain[base] = true
		for _, c := range r.Commits {
			inChain[plumbing.ComputeHash(plumbing.CommitObject, c.Object)] = true
		}
		chain = append(chain, ar)
		ar.commits = commits
		last = last[:0]
		for _, c := range chain[max(0, len(chain)-2):] {
			last = append(last, c.commits...)
		}
		prev = plumbing.ComputeHash(plumbing.CommitObject, r.Commits[len(r.Commits)-1].Object)
		s.seq = max(s.seq, r.Seq)
	}
	if len(chain) == 0 {
		return nil, nil
	}
	switch {
	case ref == prev:
	case inChain[ref] || ref.IsZero():
		s.setHead(prev)
	default:
		// HEAD is past the journal (a Commit after its flush) or
		// elsewhere: leave it. The records' objects are flushed all the
		// same; they are in the repository already, or dangling.
		return chain, nil
	}
	// A batch's first barrier may overlap the last one's second: the last
	// two records may not be in place.
	lastFiles := finalFiles(last)
	if s.opts.ReadOnly {
		for _, f := range lastFiles {
			if changed, err := needsRollForward(filepath.Join(s.dir, filepath.FromSlash(f.path)), f); err == nil && changed {
				s.repaired("rolled forward the change interrupted before its files were in place (commit %s)", prev)
				break
			}
		}
		return chain, nil
	}
	changed, err := s.rollForward(lastFiles)
	if err != nil {
		return nil, fmt.Errorf("gitstore: put the files of commit %s in place: %w", prev, err)
	}
	if len(changed) > 0 {
		s.repaired("rolled forward the change interrupted before its files were in place (commit %s): wrote %s",
			prev, strings.Join(changed, ", "))
	}
	return chain, nil
}

// rebuild builds the objects of record r on base in memory and checks
// them against its commits, and returns the record and its commits.
func (s *Store) rebuild(r *journalRecord, base plumbing.Hash) (*appliedRecord, []*Staged, error) {
	blobs := map[plumbing.Hash][]byte{}
	for _, b := range r.Blobs {
		blobs[plumbing.ComputeHash(plumbing.BlobObject, b)] = b
	}
	ar := &appliedRecord{rec: r}
	keep := func(h plumbing.Hash, obj plumbing.EncodedObject) {
		if s.addMem(h, obj, true) {
			ar.added = append(ar.added, h)
		}
	}
	parent, parentTree := base, plumbing.ZeroHash
	if !base.IsZero() {
		c, err := s.repo.CommitObject(base)
		if err != nil {
			return nil, nil, fmt.Errorf("base %s: %w", base, err)
		}
		parentTree = c.TreeHash
	}
	var batch []*Staged
	for _, jc := range r.Commits {
		obj := &plumbing.MemoryObject{}
		obj.SetType(plumbing.CommitObject)
		if _, err := obj.Write(jc.Object); err != nil {
			return nil, nil, err
		}
		var c object.Commit
		if err := c.Decode(obj); err != nil {
			return nil, nil, fmt.Errorf("commit of sequence %d: %w", r.Seq, err)
		}
		if jc.Forward {
			if _, err := s.repo.CommitObject(obj.Hash()); err != nil {
				return nil, nil, fmt.Errorf("fast-forward to %s, which is not in the repository: %w", obj.Hash(), err)
			}
		} else if want := parent; (len(c.ParentHashes) == 0) != want.IsZero() || (len(c.ParentHashes) > 0 && c.ParentHashes[0] != want) {
			return nil, nil, fmt.Errorf("commit %s does not follow %s", obj.Hash(), want)
		}
		edits := make([]treeEdit, 0, len(jc.Changes))
		st := &Staged{s: s, hash: obj.Hash(), parent: parent, done: make(chan struct{})}
		for _, ch := range jc.Changes {
			e := treeEdit{path: ch.Path, remove: ch.Blob == ""}
			if !e.remove {
				e.blob, e.mode, e.perm = plumbing.NewHash(ch.Blob), filemode.FileMode(ch.Mode), fs.FileMode(ch.Perm)
				data, ok := blobs[e.blob]
				if !ok {
					o, err := s.repo.Storer.EncodedObject(plumbing.BlobObject, e.blob)
					if err != nil {
						return nil, nil, fmt.Errorf("blob %s of %s: %w", e.blob, ch.Path, err)
					}
					if data, err = objectContents(o); err != nil {
						return nil, nil, err
					}
				}
				e.data = data
				bo := &plumbing.MemoryObject{}
				bo.SetType(plumbing.BlobObject)
				if _, err := bo.Write(data); err != nil {
					return nil, nil, err
				}
				keep(e.blob, bo)
			}
			edits = append(edits, e)
		}
		sortEdits(edits)
		root, err := s.editTree(parentTree, "", edits, keep)
		if err != nil {
			return nil, nil, err
		}
		if root != c.TreeHash {
			return nil, nil, fmt.Errorf("commit %s: its tree built again is %s, not %s", obj.Hash(), root, c.TreeHash)
		}
		for _, e := range edits {
			st.changes = append(st.changes, stagedChange{path: e.path, blob: e.blob, mode: e.mode, perm: e.perm, data: e.data, before: e.before})
		}
		keep(obj.Hash(), obj)
		batch = append(batch, st)
		parent, parentTree = obj.Hash(), root
	}
	if len(batch) == 0 {
		return nil, nil, errors.New("a record with no commit")
	}
	return ar, batch, nil
}
