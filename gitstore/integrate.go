package gitstore

import (
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/mcpkeep/mcpkeep/internal/failpoint"
)

// Integration is what Fetch did with the remote's commits.
type Integration struct {
	// Action is "none" (the remote has no commit, or the same), "ahead"
	// (the remote's commits are all here already: a push sends ours),
	// "fast-forward" (this store was behind: it now has the remote's
	// commits and files), "merge" (the histories had diverged) or
	// "diverged" (they had, and this store is not the writer: nothing was
	// integrated; see RemoteOptions.MayPush).
	Action string `json:"action"`
	Remote string `json:"remote,omitempty"` // the remote's commit
	Commit string `json:"commit,omitempty"` // HEAD after: the remote's commit, or the merge commit
	// Taken lists the files a merge took from the remote: changed there
	// only.
	Taken []string `json:"taken,omitempty"`
	// Conflicts lists the files both sides changed, differently. In
	// RemoteAsync mode the tree keeps this store's version and the
	// remote's is in the merge commit's second parent and in the tag Tag
	// points at; in RemoteSync mode, where the remote holds every
	// acknowledged change, the tree takes the remote's version and this
	// store's is in the merge commit's first parent and in the tag (see
	// KeptRemote).
	Conflicts []string `json:"conflicts,omitempty"`
	// Kept is whose version of the Conflicts the tree holds: KeptHome or
	// KeptRemote.
	Kept string `json:"kept,omitempty"`
	// Refused lists the remote's entries gitstore does not write (see
	// EntryError): a symbolic link, a submodule, a file over MaxFileSize,
	// a path into a .git; the tree keeps this store's version, as for a
	// conflict.
	Refused []string `json:"refused,omitempty"`
	// Tag is conflicts/<time>, on the commit whose versions the tree did
	// not keep (the remote's, or this store's when Kept is KeptRemote),
	// when there were conflicts or refusals.
	Tag string `json:"tag,omitempty"`
}

// The actions of an Integration.
const (
	ActionNone        = "none"
	ActionAhead       = "ahead"
	ActionFastForward = "fast-forward"
	ActionMerge       = "merge"
	ActionDiverged    = "diverged"
)

// Whose version of a file both sides changed a merge keeps in the tree
// (Integration.Kept, Conflict.Kept).
const (
	KeptHome   = "home"   // this store's; the tag is on the remote's commit
	KeptRemote = "remote" // the remote's; the tag is on this store's commit
)

// integrationPlan is an integration worked out in memory.
type integrationPlan struct {
	ours, theirs, base plumbing.Hash
	action             string
	// remoteWins makes a file both sides changed take the remote's
	// version (RemoteSync: the remote holds every acknowledged change).
	remoteWins       bool
	edits            []treeEdit // of ours' tree, each file's data read
	taken, conflicts []string
	refused          []string // "path (what)"
	handEdited       []string // files of the work tree an edit would replace that differ from ours
	// oursTrees and theirsTrees are the distinct trees of each side's
	// history, read by heldBase when the two have no commit in common.
	oursTrees, theirsTrees []plumbing.Hash
}

// integrate brings the store up to theirs (see Fetch): it plans, within
// the transactions' turn (RemoteOptions.WithTurn), against a store with
// nothing staged, and stages and applies the result.
func (r *Remote) integrate(theirs plumbing.Hash) (Integration, error) {
	in := Integration{Action: ActionNone, Remote: hashOrEmpty(theirs)}
	if theirs.IsZero() {
		return in, nil
	}
	run := r.opts.WithTurn
	if run == nil {
		run = func(fn func() error) error { return fn() }
	}
	err := run(func() error {
		s := r.s
		for attempt := 0; ; attempt++ {
			// What is staged goes first, so that HEAD is the tip and its
			// files are in place.
			if err := s.Apply(); err != nil {
				return err
			}
			s.mu.Lock()
			if len(s.staged) > 0 {
				s.mu.Unlock()
				continue // staged in between (no WithTurn): again
			}
			plan, err := s.plan(theirs, r.opts.Mode == RemoteSync)
			if err != nil {
				s.mu.Unlock()
				return err
			}
			in.Action, in.Taken, in.Conflicts, in.Refused = plan.action, plan.taken, plan.conflicts, plan.refused
			if in.Kept = ""; len(plan.conflicts) > 0 {
				in.Kept = plan.kept()
			}
			if plan.action == ActionNone || plan.action == ActionAhead {
				s.mu.Unlock()
				in.Commit = hashOrEmpty(plan.ours)
				return nil
			}
			if plan.action == ActionMerge && !r.mayPush() {
				// A merge is a new commit the remote lacks: the writer
				// makes it, and this store fast-forwards to it.
				s.mu.Unlock()
				in.Action, in.Taken, in.Conflicts, in.Refused, in.Kept = ActionDiverged, nil, nil, nil, ""
				in.Commit = hashOrEmpty(plan.ours)
				return nil
			}
			if len(plan.handEdited) > 0 {
				s.mu.Unlock()
				if attempt > 0 {
					return fmt.Errorf("gitstore: merge %s in %s: %s changed by hand as it was merging; try again",
						r.red.safe, s.dir, strings.Join(plan.handEdited, ", "))
				}
				// Edits by hand the merge would overwrite: committed
				// first, so both they and the remote's are kept.
				if _, err := s.Commit("commit changes made by hand before merging " + r.red.safe); err != nil {
					return err
				}
				continue
			}
			if plan.action == ActionMerge && plan.ours.IsZero() {
				s.mu.Unlock()
				return fmt.Errorf("gitstore: merge %s: the remote's %s holds entries gitstore refuses (%s), and this home has no commit "+
					"to keep in their place: remove them on the remote", r.red.safe, r.branch.Short(), strings.Join(plan.refused, ", "))
			}
			if plan.action == ActionMerge && (len(plan.conflicts) > 0 || len(plan.refused) > 0) {
				if in.Tag, err = s.conflictTag(plan, r.red.safe); err != nil {
					s.mu.Unlock()
					return err
				}
				if err := failpoint.Hit("gitstore.merge-after-tag"); err != nil {
					s.mu.Unlock()
					return fmt.Errorf("gitstore: merge %s: %w", r.red.safe, err)
				}
			}
			staged, err := s.stagePlan(plan, r.mergeMessage(plan, in.Tag))
			s.mu.Unlock()
			if err != nil {
				return err
			}
			if err := staged.Wait(); err != nil {
				return err
			}
			in.Commit = staged.Hash()
			r.addKnown(theirs, plan.base)
			return nil
		}
	})
	if err == nil && in.Action != ActionNone {
		r.log.Info("gitstore: fetched", "action", in.Action, "remote", short7(theirs), "commit", in.Commit,
			"taken", len(in.Taken), "conflicts", in.Conflicts, "refused", in.Refused, "tag", in.Tag)
	}
	return in, err
}

// mergeMessage is the message of a merge commit: what was taken, and one
// trailer line per conflict and refusal, which History reads.
func (r *Remote) mergeMessage(p *integrationPlan, tag string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "merge %s %s at %s: took %d file(s) changed there only", r.red.safe, r.branch.Short(), short7(p.theirs), len(p.taken))
	if n := len(p.conflicts); n > 0 && p.remoteWins {
		fmt.Fprintf(&b, "; took the remote's version of %d file(s) changed on both sides", n)
	} else if n > 0 {
		fmt.Fprintf(&b, "; kept this home's version of %d file(s) changed on both sides", n)
	}
	b.WriteString("\n\n")
	if len(p.conflicts) > 0 && p.remoteWins {
		fmt.Fprintf(&b, "%s%s\n", trailerKept, KeptRemote)
	}
	writeTrailers(&b, p)
	if tag != "" {
		fmt.Fprintf(&b, "%s%s\n", trailerTag, tag)
	}
	return b.String()
}

// kept is whose version of the files both sides changed p keeps.
func (p *integrationPlan) kept() string {
	if p.remoteWins {
		return KeptRemote
	}
	return KeptHome
}

// plan works out how to bring ours (HEAD, with nothing staged) up to
// theirs; remoteWins says a file both changed takes theirs' version. The
// caller holds s.mu.
func (s *Store) plan(theirs plumbing.Hash, remoteWins bool) (*integrationPlan, error) {
	p := &integrationPlan{ours: s.headHash, theirs: theirs, remoteWins: remoteWins}
	if p.ours == theirs {
		p.action = ActionNone
		return p, nil
	}
	tc, err := s.repo.CommitObject(theirs)
	if err != nil {
		return nil, fmt.Errorf("gitstore: the remote's commit %s: %w", theirs, err)
	}
	oursTree := plumbing.ZeroHash
	if !p.ours.IsZero() {
		oc, err := s.repo.CommitObject(p.ours)
		if err != nil {
			return nil, err
		}
		oursTree = oc.TreeHash
		bases, err := oc.MergeBase(tc)
		if err != nil {
			return nil, fmt.Errorf("gitstore: merge base of %s and %s: %w", p.ours, theirs, err)
		}
		if len(bases) > 0 {
			p.base = bases[0].Hash
		}
	}
	baseTree := plumbing.ZeroHash
	switch {
	case p.base == theirs:
		p.action = ActionAhead
		return p, nil
	case p.base == p.ours: // ours is empty, or in theirs' history
		p.action = ActionFastForward
		baseTree = oursTree
	default:
		p.action = ActionMerge
		if !p.base.IsZero() {
			bc, err := s.repo.CommitObject(p.base)
			if err != nil {
				return nil, err
			}
			baseTree = bc.TreeHash
		}
	}
	if err := s.threeWay(p, "", baseTree, oursTree, tc.TreeHash); err != nil {
		return nil, err
	}
	if p.action == ActionFastForward && len(p.refused) > 0 {
		p.action = ActionMerge // theirs' tree cannot be ours: a merge records what was left out
	}
	sortEdits(p.edits)
	rev := short7(theirs)
	for i := range p.edits {
		e := &p.edits[i]
		cur, _, err := blobOf(filepath.Join(s.dir, filepath.FromSlash(e.path)))
		if err != nil {
			return nil, err
		}
		if cur != e.before {
			p.handEdited = append(p.handEdited, e.path)
		}
		if !e.remove {
			if err := s.checkWorkDirs(rev, e.path); err != nil {
				return nil, err
			}
		}
	}
	return p, nil
}

// threeWay adds to p what merging trees b (the base), o (ours) and t
// (theirs) under prefix takes from theirs, and the paths both changed.
// A ZeroHash tree is an absent one.
func (s *Store) threeWay(p *integrationPlan, prefix string, b, o, t plumbing.Hash) error {
	be, err := s.entriesByName(b)
	if err != nil {
		return err
	}
	oe, err := s.entriesByName(o)
	if err != nil {
		return err
	}
	te, err := s.entriesByName(t)
	if err != nil {
		return err
	}
	names := make([]string, 0, len(oe)+len(te))
	for _, m := range []map[string]object.TreeEntry{be, oe, te} {
		for n := range m {
			if !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
	}
	slices.Sort(names)
	for _, name := range names {
		full := prefix + name
		bEnt, bOK := be[name]
		oEnt, oOK := oe[name]
		tEnt, tOK := te[name]
		same := func(aOK bool, a object.TreeEntry, cOK bool, c object.TreeEntry) bool {
			return aOK == cOK && (!aOK || a.Hash == c.Hash && a.Mode == c.Mode)
		}
		if p.base.IsZero() && !bOK && oOK && tOK && oEnt.Mode != filemode.Dir && tEnt.Mode != filemode.Dir && !same(oOK, oEnt, tOK, tEnt) {
			// Histories with no commit in common (two homes installed
			// on their own): a version one side's history held is
			// the base of the file, the other side changed it since.
			if bEnt, bOK, err = s.heldBase(p, full, oEnt, tEnt); err != nil {
				return err
			}
		}
		switch {
		case same(oOK, oEnt, tOK, tEnt), same(bOK, bEnt, tOK, tEnt):
			// Theirs is ours, or unchanged: ours stands.
		case same(bOK, bEnt, oOK, oEnt):
			if err := s.takeTheirs(p, full, oOK, oEnt, tOK, tEnt); err != nil {
				return err
			}
		case oOK && tOK && oEnt.Mode == filemode.Dir && tEnt.Mode == filemode.Dir:
			bh := plumbing.ZeroHash
			if bOK && bEnt.Mode == filemode.Dir {
				bh = bEnt.Hash
			}
			if err := s.threeWay(p, full+"/", bh, oEnt.Hash, tEnt.Hash); err != nil {
				return err
			}
		case p.remoteWins:
			if err := s.remoteWins(p, full, oOK, oEnt, tOK, tEnt); err != nil {
				return err
			}
		default:
			p.conflicts = append(p.conflicts, full)
		}
	}
	return nil
}

// heldBase is the base of file full for a merge of two histories with no
// commit in common, which both sides hold, differently (ours oEnt, theirs
// tEnt): theirs' version when ours' history held it and theirs' history
// did not hold ours' (ours changed the file since, from theirs' version),
// and the other way round; else none (ok false), and the file is a
// conflict. Two homes installed from the same defaults each start a
// history: a default file one of them changed before they first merged
// is then no conflict, whichever side merges. The caller holds s.mu.
func (s *Store) heldBase(p *integrationPlan, full string, oEnt, tEnt object.TreeEntry) (object.TreeEntry, bool, error) {
	oursHeld, err := s.historyHolds(p.ours, &p.oursTrees, full, tEnt)
	if err != nil {
		return object.TreeEntry{}, false, err
	}
	theirsHeld, err := s.historyHolds(p.theirs, &p.theirsTrees, full, oEnt)
	if err != nil {
		return object.TreeEntry{}, false, err
	}
	switch {
	case oursHeld && !theirsHeld:
		return tEnt, true, nil
	case theirsHeld && !oursHeld:
		return oEnt, true, nil
	}
	return object.TreeEntry{}, false, nil
}

// historyHolds reports whether a commit of tip's history has entry e (the
// same blob and mode) at path full. *trees caches the history's distinct
// trees, read on first use: a merge with no base has walked both
// histories whole already (the merge base search), and reads them once
// more.
func (s *Store) historyHolds(tip plumbing.Hash, trees *[]plumbing.Hash, full string, e object.TreeEntry) (bool, error) {
	if *trees == nil {
		seen := map[plumbing.Hash]bool{}
		queued := map[plumbing.Hash]bool{tip: true}
		for queue := []plumbing.Hash{tip}; len(queue) > 0; {
			c, err := s.repo.CommitObject(queue[0])
			if err != nil {
				return false, fmt.Errorf("gitstore: the history of %s: %w", tip, err)
			}
			queue = queue[1:]
			if !seen[c.TreeHash] {
				seen[c.TreeHash] = true
				*trees = append(*trees, c.TreeHash)
			}
			for _, h := range c.ParentHashes {
				if !queued[h] {
					queued[h] = true
					queue = append(queue, h)
				}
			}
		}
	}
	for _, th := range *trees {
		tree, err := object.GetTree(s.repo.Storer, th)
		if err != nil {
			return false, fmt.Errorf("gitstore: tree %s: %w", th, err)
		}
		got, err := tree.FindEntry(full)
		if err != nil {
			// Not there in this commit, or a part of full is a file
			// in it: not held. (Counting what cannot be read as not
			// held can only leave a conflict, as without heldBase.)
			continue
		}
		if got.Hash == e.Hash && got.Mode == e.Mode {
			return true, nil
		}
	}
	return false, nil
}

// remoteWins adds to p the edits that make ours' entry at full, which
// both sides changed, theirs', and counts full a conflict. What
// takeTheirs keeps as ours (a file becoming a directory, an entry
// gitstore refuses) stays a conflict or a refusal as it records it.
func (s *Store) remoteWins(p *integrationPlan, full string, oOK bool, oEnt object.TreeEntry, tOK bool, tEnt object.TreeEntry) error {
	taken, conflicts, refused := len(p.taken), len(p.conflicts), len(p.refused)
	if err := s.takeTheirs(p, full, oOK, oEnt, tOK, tEnt); err != nil {
		return err
	}
	if len(p.conflicts) > conflicts || len(p.refused) > refused {
		return nil
	}
	p.taken = p.taken[:taken]
	p.conflicts = append(p.conflicts, full)
	return nil
}

// takeTheirs adds the edits that make ours' entry at full (a file or a
// directory, or none) theirs'. A file becoming a directory, or the other
// way, is kept as ours and counted a conflict: the work tree could not
// switch it all or nothing.
func (s *Store) takeTheirs(p *integrationPlan, full string, oOK bool, oEnt object.TreeEntry, tOK bool, tEnt object.TreeEntry) error {
	oDir, tDir := oOK && oEnt.Mode == filemode.Dir, tOK && tEnt.Mode == filemode.Dir
	switch {
	case oOK && tOK && oDir != tDir:
		p.conflicts = append(p.conflicts, full)
		return nil
	case !tOK && oDir:
		files, err := s.filesUnder(oEnt.Hash, full+"/")
		if err != nil {
			return err
		}
		for _, f := range files {
			p.edits = append(p.edits, treeEdit{path: f.path, remove: true, before: f.hash})
			p.taken = append(p.taken, f.path)
		}
		return nil
	case !tOK:
		p.edits = append(p.edits, treeEdit{path: full, remove: true, before: oEnt.Hash})
		p.taken = append(p.taken, full)
		return nil
	case tDir:
		oh := plumbing.ZeroHash
		if oDir {
			oh = oEnt.Hash
		}
		// Ours is the base here: a two-way walk of the subtree takes
		// every difference.
		return s.threeWay(p, full+"/", oh, oh, tEnt.Hash)
	}
	before := plumbing.ZeroHash
	if oOK {
		before = oEnt.Hash
	}
	if what, ok := s.refusal(full, tEnt); !ok {
		p.refused = append(p.refused, full+" ("+what+")")
		return nil
	}
	o, err := s.repo.Storer.EncodedObject(plumbing.BlobObject, tEnt.Hash)
	if err != nil {
		return fmt.Errorf("gitstore: the remote's %s (blob %s): %w", full, tEnt.Hash, err)
	}
	data, err := objectContents(o)
	if err != nil {
		return err
	}
	perm := fs.FileMode(0o600)
	mode := filemode.Regular
	if tEnt.Mode == filemode.Executable {
		perm, mode = 0o700, filemode.Executable
	}
	p.edits = append(p.edits, treeEdit{path: full, blob: tEnt.Hash, mode: mode, perm: perm, data: data, before: before})
	p.taken = append(p.taken, full)
	return nil
}

// refusal says why the store will not take entry e at full from a remote
// (what EntryError says), or ok.
func (s *Store) refusal(full string, e object.TreeEntry) (what string, ok bool) {
	if !safePath(full) || strings.ContainsAny(path.Base(full), "\\") {
		return "a path that leads out of the work tree or into a .git directory", false
	}
	switch e.Mode {
	case filemode.Regular, filemode.Executable, filemode.Deprecated:
	case filemode.Symlink:
		return "a symbolic link", false
	case filemode.Submodule:
		return "a submodule", false
	default:
		return fmt.Sprintf("an entry of mode %o, not a regular file", uint32(e.Mode)), false
	}
	if limit := s.maxFileSize(); limit >= 0 {
		size, err := s.repo.Storer.EncodedObjectSize(e.Hash)
		if err != nil {
			return "a file whose blob is missing", false
		}
		if size > limit {
			return fmt.Sprintf("a file of %d bytes, more than the %d allowed", size, limit), false
		}
	}
	return "", true
}

// entriesByName returns the entries of tree h by name (none for ZeroHash).
func (s *Store) entriesByName(h plumbing.Hash) (map[string]object.TreeEntry, error) {
	entries, err := s.treeEntries(h)
	if err != nil {
		return nil, err
	}
	out := make(map[string]object.TreeEntry, len(entries))
	for _, e := range entries {
		out[e.Name] = e
	}
	return out, nil
}

// treeFile is a file of a tree: its path and blob.
type treeFile struct {
	path string
	hash plumbing.Hash
}

// filesUnder lists the files of tree h, their paths under prefix.
func (s *Store) filesUnder(h plumbing.Hash, prefix string) ([]treeFile, error) {
	entries, err := s.treeEntries(h)
	if err != nil {
		return nil, err
	}
	var out []treeFile
	for _, e := range entries {
		if e.Mode == filemode.Dir {
			sub, err := s.filesUnder(e.Hash, prefix+e.Name+"/")
			if err != nil {
				return nil, err
			}
			out = append(out, sub...)
			continue
		}
		out = append(out, treeFile{path: prefix + e.Name, hash: e.Hash})
	}
	return out, nil
}

// stagePlan stages the commit of plan p on HEAD (nothing else staged):
// the remote's commit itself for a fast-forward, else a merge commit
// with parents HEAD and the remote's commit, and message msg. The caller
// holds s.mu.
func (s *Store) stagePlan(p *integrationPlan, msg string) (*Staged, error) {
	if s.jr == nil {
		return nil, fmt.Errorf("merge in %s: %w", s.dir, ErrClosed)
	}
	var added []plumbing.Hash
	keep := func(h plumbing.Hash, obj plumbing.EncodedObject) {
		if s.addMem(h, obj, true) {
			added = append(added, h)
		}
	}
	edits := slices.Clone(p.edits)
	root, err := s.editTree(s.tipTree, "", edits, keep)
	if err == nil && root.IsZero() {
		root = emptyTree
	}
	if err != nil {
		s.dropMem(added)
		return nil, err
	}
	c := &Staged{s: s, parent: s.tip, done: make(chan struct{})}
	for _, e := range edits {
		c.changes = append(c.changes, stagedChange{path: e.path, blob: e.blob, mode: e.mode, perm: e.perm, data: e.data, before: e.before})
	}
	if p.action == ActionFastForward {
		tc, err := s.repo.CommitObject(p.theirs)
		if err != nil {
			s.dropMem(added)
			return nil, err
		}
		if tc.TreeHash != root && !(tc.TreeHash == emptyTree && root.IsZero()) {
			s.dropMem(added)
			return nil, fmt.Errorf("gitstore: fast-forward to %s: its tree built again is %s, not %s", p.theirs, root, tc.TreeHash)
		}
		o, err := s.repo.Storer.EncodedObject(plumbing.CommitObject, p.theirs)
		if err != nil {
			s.dropMem(added)
			return nil, err
		}
		if c.object, err = objectContents(o); err != nil {
			s.dropMem(added)
			return nil, err
		}
		c.hash, c.forward = p.theirs, true
	} else {
		for _, e := range edits {
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
		parents := []plumbing.Hash{p.ours, p.theirs}
		if p.ours.IsZero() {
			parents = []plumbing.Hash{p.theirs}
		}
		if err := s.encodeCommit(c, msg, root, parents, keep); err != nil {
			s.dropMem(added)
			return nil, err
		}
	}
	s.enqueue(c, root, added)
	return c, nil
}
