package gitstore

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/mcpkeep/mcpkeep/atomicfile"
)

// ErrBadPath is matched by the error of Stage for a path it refuses.
var ErrBadPath = errors.New("gitstore: bad path")

// Change is one file of a commit Stage builds: its new bytes, or its
// removal.
type Change struct {
	Path   string // slash-separated, relative to the work tree, clean, outside .git
	Data   []byte // the file's new bytes; ignored when Remove
	Remove bool   // remove the file (nothing to do if there is none)
}

// stagedState is where a Staged commit is.
type stagedState int

const (
	stagedWaiting stagedState = iota // built in memory; the next Apply takes it
	stagedTaken                      // in a batch before its first barrier returned
	stagedApplied                    // durable, and its files in place
	stagedDurable                    // durable, its files not all in place: an *UnfinishedError
	stagedDropped                    // never to be written: err says why
)

// Staged is a commit Stage built in memory. Apply makes it durable and puts
// its files in place; Result says when it has.
type Staged struct {
	s       *Store
	hash    plumbing.Hash
	parent  plumbing.Hash // ZeroHash for the first commit
	object  []byte        // the commit object's contents
	changes []stagedChange
	added   []plumbing.Hash // objects this commit added to memory
	forward bool            // a fast-forward to a fetched commit (integrate.go)
	// Under s.mu: where the commit is, its result, and done, closed once
	// Apply is done with it.
	state    stagedState
	err      error
	done     chan struct{}
	resolved bool
}

// resolve sets c's state and result and, the first time, closes done.
// The caller holds s.mu.
func (c *Staged) resolve(state stagedState, err error) {
	c.state, c.err = state, err
	if !c.resolved {
		c.resolved = true
		close(c.done)
	}
}

// stagedChange is one path of a staged commit.
type stagedChange struct {
	path   string
	blob   plumbing.Hash // ZeroHash: removed
	mode   filemode.FileMode
	perm   fs.FileMode // of the file in the work tree
	data   []byte
	before plumbing.Hash // the path's blob in the parent's tree; ZeroHash: none
}

// Hash returns the commit's hash.
func (c *Staged) Hash() string { return c.hash.String() }

// Result reports whether Apply has finished with the commit and how:
// done is false while it waits for an Apply; then err is nil when the
// commit is durable and its files in place, an *UnfinishedError when it is
// durable but its files are not all in place yet (nil again once a later
// Apply or Flush has put them in place), and otherwise the error that
// dropped it, unwritten.
func (c *Staged) Result() (done bool, err error) {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	return c.state != stagedWaiting && c.state != stagedTaken, c.err
}

// Stage builds, in memory, a commit with message msg that changes the
// files of changes, on top of the last commit staged (or HEAD), and
// returns it; nil when the changes leave the tree as it is. Nothing is
// written: Apply writes every staged commit in two barriers. The tree is
// the parent's tree with the changed paths, whatever else the work tree
// holds: a file changed by hand is not in the commit. A path may appear
// once; a bad one gives an error matching ErrBadPath, and so does writing
// a file where the tree has a directory or a file under a file.
func (s *Store) Stage(msg string, changes []Change) (*Staged, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.writable("stage a commit"); err != nil {
		return nil, err
	}
	if s.jr == nil {
		return nil, fmt.Errorf("stage in %s: %w", s.dir, ErrClosed)
	}
	if _, journaled := s.overlay[plumbing.ReferenceName(s.branch)]; !journaled && len(s.staged) == 0 {
		// Nothing in the journal: the ref on disk is HEAD, wherever
		// another tool may have moved it.
		h, err := s.head()
		if err != nil {
			return nil, err
		}
		if h != s.headHash {
			s.setHead(h)
			delete(s.overlay, plumbing.ReferenceName(s.branch))
		}
	}
	edits := make([]treeEdit, 0, len(changes))
	for _, c := range changes {
		p, err := cleanPath(c.Path)
		if err == nil && p == "" {
			err = fmt.Errorf("gitstore: an empty path names no file")
		}
		if err == nil && (strings.HasPrefix(p, ".git.") || slices.ContainsFunc(strings.Split(p, "/"), atomicfile.IsTemp)) {
			err = fmt.Errorf("gitstore: path %q is a name gitstore never versions (a temporary file's, or one beside .git)", p)
		}
		if err == nil && slices.ContainsFunc(strings.Split(p, "/"), func(e string) bool { return strings.EqualFold(e, ".git") }) {
			err = fmt.Errorf("gitstore: path %q has a .git element, which git refuses in a tree", p)
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrBadPath, err)
		}
		e := treeEdit{path: p, remove: c.Remove, data: c.Data}
		if limit := s.maxFileSize(); !c.Remove && limit >= 0 && int64(len(c.Data)) > limit {
			return nil, fmt.Errorf("gitstore: %s: %d bytes is more than Options.MaxFileSize (%d), which Commit and ReadAt refuse: %w",
				p, len(c.Data), limit, atomicfile.ErrTooLarge)
		}
		if !c.Remove {
			e.perm = s.workPerm(p)
			e.mode = filemode.Regular
			if e.perm&0o111 != 0 {
				e.mode = filemode.Executable
			}
			e.blob = plumbing.ComputeHash(plumbing.BlobObject, c.Data)
		}
		edits = append(edits, e)
	}
	sortEdits(edits)
	for i := 1; i < len(edits); i++ {
		if edits[i].path == edits[i-1].path {
			return nil, fmt.Errorf("%w: path %q is named twice", ErrBadPath, edits[i].path)
		}
	}
	var added []plumbing.Hash
	keep := func(h plumbing.Hash, obj plumbing.EncodedObject) {
		if s.addMem(h, obj, false) {
			added = append(added, h)
		}
	}
	root, err := s.editTree(s.tipTree, "", edits, keep)
	if err != nil {
		s.dropMem(added)
		return nil, err
	}
	if root == s.tipTree || (s.tip.IsZero() && root == emptyTree) {
		s.dropMem(added)
		return nil, nil
	}
	c := &Staged{s: s, parent: s.tip, done: make(chan struct{})}
	for i := range edits {
		e := &edits[i]
		c.changes = append(c.changes, stagedChange{path: e.path, blob: e.blob, mode: e.mode, perm: e.perm, data: e.data, before: e.before})
		if !e.remove {
			obj := &plumbing.MemoryObject{}
			obj.SetType(plumbing.BlobObject)
			if _, err := obj.Write(e.data); err != nil {
				s.dropMem(added)
				return nil, err
			}
			keep(e.blob, obj)
		}
	}
	var parents []plumbing.Hash
	if !s.tip.IsZero() {
		parents = []plumbing.Hash{s.tip}
	}
	if err := s.encodeCommit(c, msg, root, parents, keep); err != nil {
		s.dropMem(added)
		return nil, err
	}
	s.enqueue(c, root, added)
	return c, nil
}

// encodeCommit makes c's commit, of tree root with parents and message
// msg, signed by the store's author, and keeps it in memory.
func (s *Store) encodeCommit(c *Staged, msg string, root plumbing.Hash, parents []plumbing.Hash, keep func(plumbing.Hash, plumbing.EncodedObject)) error {
	sig := object.Signature{Name: s.opts.AuthorName, Email: s.opts.AuthorEmail, When: time.Now().Truncate(time.Second)}
	commit := &object.Commit{Author: sig, Committer: sig, Message: msg, TreeHash: root, ParentHashes: parents}
	obj := &plumbing.MemoryObject{}
	if err := commit.Encode(obj); err != nil {
		return err
	}
	var err error
	c.hash = obj.Hash()
	if c.object, err = objectContents(obj); err != nil {
		return err
	}
	keep(c.hash, obj)
	return nil
}

// enqueue stages c, whose tree is root and whose new objects are added,
// after the others, and wakes the committer.
func (s *Store) enqueue(c *Staged, root plumbing.Hash, added []plumbing.Hash) {
	c.added = added
	s.staged = append(s.staged, c)
	s.tip, s.tipTree = c.hash, root
	select {
	case s.stagedSignal <- struct{}{}:
	default:
	}
}

// workPerm returns the permissions the file at p gets in the work tree:
// those of the regular file there now, else 0600.
func (s *Store) workPerm(p string) fs.FileMode {
	fi, err := os.Lstat(filepath.Join(s.dir, filepath.FromSlash(p)))
	if err == nil && fi.Mode().IsRegular() {
		return fi.Mode().Perm()
	}
	return 0o600
}

// treeEdit is one path of a tree to change.
type treeEdit struct {
	path   string // slash-separated, from the root
	remove bool
	blob   plumbing.Hash
	mode   filemode.FileMode
	perm   fs.FileMode
	data   []byte
	before plumbing.Hash // set by editTree: the blob the path had
}

// editTree returns the hash of the tree h (ZeroHash: none) with edits
// (sorted, relative to it) applied, passing each new tree object to keep.
// It returns ZeroHash for a subtree left empty (git keeps no empty
// directory), and the empty tree's hash for an empty root.
func (s *Store) editTree(h plumbing.Hash, prefix string, edits []treeEdit, keep func(plumbing.Hash, plumbing.EncodedObject)) (plumbing.Hash, error) {
	entries, err := s.treeEntries(h)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	entries = slices.Clone(entries)
	find := func(name string) int {
		return slices.IndexFunc(entries, func(e object.TreeEntry) bool { return e.Name == name })
	}
	for i := 0; i < len(edits); {
		rel := strings.TrimPrefix(edits[i].path, prefix)
		name, _, isDir := strings.Cut(rel, "/")
		at := find(name)
		if !isDir {
			e := &edits[i]
			if at >= 0 && entries[at].Mode == filemode.Dir {
				if e.remove {
					i++ // a directory is not a file: nothing to remove
					continue
				}
				return plumbing.ZeroHash, fmt.Errorf("%w: %q is a directory in the tree", ErrBadPath, e.path)
			}
			if at >= 0 {
				e.before = entries[at].Hash
			}
			switch {
			case e.remove && at >= 0:
				entries = slices.Delete(entries, at, at+1)
			case e.remove:
			case at >= 0:
				entries[at] = object.TreeEntry{Name: name, Mode: e.mode, Hash: e.blob}
			default:
				entries = append(entries, object.TreeEntry{Name: name, Mode: e.mode, Hash: e.blob})
			}
			i++
			continue
		}
		sub := prefix + name + "/"
		j := i
		for j < len(edits) && strings.HasPrefix(edits[j].path, sub) {
			j++
		}
		subHash := plumbing.ZeroHash
		if at >= 0 {
			if entries[at].Mode != filemode.Dir {
				if !slices.ContainsFunc(edits[i:j], func(e treeEdit) bool { return !e.remove }) {
					i = j // nothing under a file to remove
					continue
				}
				return plumbing.ZeroHash, fmt.Errorf("%w: %q is a file in the tree, so %q cannot be under it", ErrBadPath, strings.TrimSuffix(sub, "/"), edits[i].path)
			}
			subHash = entries[at].Hash
		}
		newSub, err := s.editTree(subHash, sub, edits[i:j], keep)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		switch {
		case newSub.IsZero() && at >= 0:
			entries = slices.Delete(entries, at, at+1)
		case newSub.IsZero():
		case at >= 0:
			entries[at].Hash = newSub
		default:
			entries = append(entries, object.TreeEntry{Name: name, Mode: filemode.Dir, Hash: newSub})
		}
		i = j
	}
	if len(entries) == 0 && prefix != "" {
		return plumbing.ZeroHash, nil
	}
	slices.SortFunc(entries, func(a, b object.TreeEntry) int { return strings.Compare(sortKey(a), sortKey(b)) })
	tree := &object.Tree{Entries: entries}
	obj := &plumbing.MemoryObject{}
	if err := tree.Encode(obj); err != nil {
		return plumbing.ZeroHash, err
	}
	th := obj.Hash()
	s.cacheTree(th, entries)
	keep(th, obj)
	return th, nil
}

// maxCachedTrees bounds the decoded trees a Store keeps.
const maxCachedTrees = 4096

// cacheTree keeps the decoded entries of tree h.
func (s *Store) cacheTree(h plumbing.Hash, entries []object.TreeEntry) {
	if len(s.trees) >= maxCachedTrees {
		clear(s.trees)
	}
	s.trees[h] = entries
}

// treeEntries returns the entries of tree h (none for ZeroHash), from the
// cache, memory or the repository. The caller must not change them.
func (s *Store) treeEntries(h plumbing.Hash) ([]object.TreeEntry, error) {
	if h.IsZero() {
		return nil, nil
	}
	if e, ok := s.trees[h]; ok {
		return e, nil
	}
	t, err := s.repo.TreeObject(h)
	if err != nil {
		return nil, fmt.Errorf("gitstore: tree %s in %s: %w", h, s.dir, err)
	}
	s.cacheTree(h, t.Entries)
	return t.Entries, nil
}

// entryAt returns the entry of path p (slash-separated) in tree h.
func (s *Store) entryAt(h plumbing.Hash, p string) (object.TreeEntry, bool, error) {
	dir, name := path.Split(p)
	for _, part := range strings.Split(strings.TrimSuffix(dir, "/"), "/") {
		if part == "" {
			continue
		}
		entries, err := s.treeEntries(h)
		if err != nil {
			return object.TreeEntry{}, false, err
		}
		i := slices.IndexFunc(entries, func(e object.TreeEntry) bool { return e.Name == part && e.Mode == filemode.Dir })
		if i < 0 {
			return object.TreeEntry{}, false, nil
		}
		h = entries[i].Hash
	}
	entries, err := s.treeEntries(h)
	if err != nil {
		return object.TreeEntry{}, false, err
	}
	i := slices.IndexFunc(entries, func(e object.TreeEntry) bool { return e.Name == name })
	if i < 0 {
		return object.TreeEntry{}, false, nil
	}
	return entries[i], true, nil
}

// sortEdits sorts edits by path, as editTree needs them.
func sortEdits(edits []treeEdit) {
	slices.SortFunc(edits, func(a, b treeEdit) int { return strings.Compare(a.path, b.path) })
}

// maxFileSize is the largest file the store versions, or -1 for no limit.
func (s *Store) maxFileSize() int64 {
	switch {
	case s.opts.MaxFileSize == 0:
		return atomicfile.DefaultMaxSize
	case s.opts.MaxFileSize < 0:
		return -1
	}
	return s.opts.MaxFileSize
}
