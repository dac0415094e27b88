package gitstore

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/mcpkeep/mcpkeep/atomicfile"
)

// Commit describes one commit of the history.
type Commit struct {
	Hash    string    `json:"hash"`    // the full hash, 40 hex digits
	Message string    `json:"message"` // without surrounding space
	Author  string    `json:"author"`  // the author's name (Options.AuthorName)
	When    time.Time `json:"when"`    // the author time, to the second
	// Conflicts lists, for a merge of a remote's commits, the files both
	// sides changed (this store's version kept, or in RemoteSync mode the
	// remote's) and the remote's entries it refused; ConflictTag is the
	// conflicts/<time> tag on the versions not kept (see Store.Conflicts).
	Conflicts   []string `json:"conflicts,omitempty"`
	ConflictTag string   `json:"conflict_tag,omitempty"` // "" when the commit is no such merge
}

// cleanPath checks a work-tree path given by a caller: relative,
// slash-separated, inside the tree, not in .git.
func cleanPath(p string) (string, error) {
	if p == "" {
		return "", nil
	}
	c := path.Clean(filepath.ToSlash(p))
	if path.IsAbs(c) || c == ".." || strings.HasPrefix(c, "../") || c == ".git" || strings.HasPrefix(c, ".git/") {
		return "", fmt.Errorf("gitstore: path %q must be relative to the config directory and outside .git", p)
	}
	if c == "." {
		return "", nil
	}
	return c, nil
}

var hexRev = regexp.MustCompile(`^[0-9a-f]{4,39}$`)

// resolve returns the commit rev names: a full or short hash, HEAD, HEAD~N,
// a branch or a tag. A name made only of hex digits, such as the tag
// "2026", is taken as git rev-parse takes it (gitrevisions(7)): the ref of
// that name if there is one, else a short hash. (Forty hex digits are
// always a hash, to git too.)
func (s *Store) resolve(rev string) (*object.Commit, error) {
	if rev == "" {
		return nil, &RevisionError{Rev: rev, Err: errors.New("empty revision")}
	}
	if hexRev.MatchString(rev) {
		if c, err := s.resolveRef(rev); c != nil || err != nil {
			return c, err
		}
		return s.resolvePrefix(rev)
	}
	h, err := s.repo.ResolveRevision(plumbing.Revision(rev))
	if err != nil {
		if errors.Is(err, io.EOF) {
			// go-git's answer for HEAD~N past the first commit.
			err = errors.New("it goes back past the first commit")
		}
		return nil, &RevisionError{Rev: rev, Err: err}
	}
	c, err := s.repo.CommitObject(*h)
	if err != nil {
		// A tag object: peel it.
		if tag, terr := s.repo.TagObject(*h); terr == nil {
			if c, cerr := tag.Commit(); cerr == nil {
				return c, nil
			}
		}
		return nil, &RevisionError{Rev: rev, Err: err}
	}
	return c, nil
}

// resolveRef returns the commit the ref name names, trying git's rules
// in git's order (name, refs/name, refs/tags/name, refs/heads/name, …), or
// nil and nil when no ref has that name.
func (s *Store) resolveRef(name string) (*object.Commit, error) {
	for _, rule := range plumbing.RefRevParseRules {
		ref, err := s.repo.Reference(plumbing.ReferenceName(fmt.Sprintf(rule, name)), true)
		if err != nil {
			continue
		}
		if c, err := s.repo.CommitObject(ref.Hash()); err == nil {
			return c, nil
		}
		tag, err := s.repo.TagObject(ref.Hash())
		if err != nil {
			return nil, &RevisionError{Rev: name, Err: fmt.Errorf("ref %s names neither a commit nor a tag: %w", ref.Name(), err)}
		}
		c, err := tag.Commit()
		if err != nil {
			return nil, &RevisionError{Rev: name, Err: fmt.Errorf("tag %s: %w", ref.Name(), err)}
		}
		return c, nil
	}
	return nil, nil
}

// resolvePrefix finds the commit whose hash starts with prefix, walking the
// history from HEAD.
func (s *Store) resolvePrefix(prefix string) (*object.Commit, error) {
	head, err := s.headCommit()
	if err != nil {
		return nil, err
	}
	var found *object.Commit
	for c := head; c != nil; {
		if strings.HasPrefix(c.Hash.String(), prefix) {
			if found != nil {
				return nil, &RevisionError{Rev: prefix, Err: errors.New("ambiguous: give more digits")}
			}
			found = c
			if len(prefix) >= 12 {
				break
			}
		}
		if c.NumParents() == 0 {
			break
		}
		if c, err = c.Parent(0); err != nil {
			return nil, err
		}
	}
	if found == nil {
		return nil, &RevisionError{Rev: prefix, Err: errors.New("no commit in the history has this hash")}
	}
	return found, nil
}

// entryHash returns the blob hash of path in c, or ZeroHash if absent.
func entryHash(c *object.Commit, p string) plumbing.Hash {
	tree, err := c.Tree()
	if err != nil {
		return plumbing.ZeroHash
	}
	if p == "" {
		return tree.Hash
	}
	e, err := tree.FindEntry(p)
	if err != nil {
		return plumbing.ZeroHash
	}
	return e.Hash
}

// History returns up to n commits (all when n <= 0), newest first, that
// changed path ("" for every commit), following first parents.
func (s *Store) History(p string, n int) ([]Commit, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, err := cleanPath(p)
	if err != nil {
		return nil, err
	}
	c, err := s.headCommit()
	if err != nil {
		return nil, err
	}
	var out []Commit
	for c != nil && (n <= 0 || len(out) < n) {
		var parent *object.Commit
		if c.NumParents() > 0 {
			if parent, err = c.Parent(0); err != nil {
				return out, err
			}
		}
		changed := p == ""
		if !changed {
			mine := entryHash(c, p)
			changed = parent == nil && !mine.IsZero() || parent != nil && entryHash(parent, p) != mine
		}
		// A merge that kept this store's version of p changed nothing in
		// it, but names it: the remote's version is in its history.
		conflicts, tag := mergeConflicts(c)
		if !changed && slices.ContainsFunc(conflicts, func(f string) bool { return f == p || strings.HasPrefix(f, p+"/") }) {
			changed = true
		}
		if changed {
			out = append(out, Commit{Hash: c.Hash.String(), Message: strings.TrimSpace(c.Message),
				Author: c.Author.Name, When: c.Author.When, Conflicts: conflicts, ConflictTag: tag})
		}
		c = parent
	}
	return out, nil
}

// ReadAt returns the bytes of path at revision rev. A path missing at rev
// gives an error matching fs.ErrNotExist; a bad rev a *RevisionError; a
// symbolic link, or a file larger than Options.MaxFileSize, an
// *EntryError (never the link's target).
func (s *Store) ReadAt(rev, p string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	data, _, err := s.readAt(rev, p)
	return data, err
}

func (s *Store) readAt(rev, p string) ([]byte, filemode.FileMode, error) {
	p, err := cleanPath(p)
	if err != nil {
		return nil, 0, err
	}
	c, err := s.resolve(rev)
	if err != nil {
		return nil, 0, err
	}
	f, err := c.File(p)
	if err != nil {
		return nil, 0, &fs.PathError{Op: "read at " + rev, Path: p, Err: fs.ErrNotExist}
	}
	if err := s.checkEntry(rev, f); err != nil {
		return nil, 0, err
	}
	body, err := f.Contents()
	if err != nil {
		return nil, 0, err
	}
	return []byte(body), f.Mode, nil
}

// FilesAt lists the files of the tree at revision rev, slash-separated and
// relative to the work tree, in git's order. A bad rev gives a
// *RevisionError. Rollback(rev) writes exactly these files, and removes
// the others: a caller that must be able to undo it (lifecycle.Env) saves
// them and the current files first.
func (s *Store) FilesAt(rev string) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, err := s.resolve(rev)
	if err != nil {
		return nil, err
	}
	tree, err := c.Tree()
	if err != nil {
		return nil, err
	}
	var files []string
	err = tree.Files().ForEach(func(f *object.File) error {
		files = append(files, f.Name)
		return nil
	})
	return files, err
}

// Restore writes path's bytes at rev into the work tree, atomically. It
// does not commit and does not move HEAD. An entry it will not write (see
// EntryError) is refused and the work tree left as it was.
func (s *Store) Restore(p, rev string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.writable("restore " + p); err != nil {
		return err
	}
	data, mode, err := s.readAt(rev, p)
	if err != nil {
		return err
	}
	p, _ = cleanPath(p) // readAt checked it
	if err := s.checkWorkDirs(rev, p); err != nil {
		return err
	}
	return s.writeWork(p, data, mode)
}

// writeWork writes a file of the history into the work tree: a regular
// file, executable or not, as checkEntry and checkWorkDirs let through.
func (s *Store) writeWork(p string, data []byte, mode filemode.FileMode) error {
	dst := filepath.Join(s.dir, filepath.FromSlash(p))
	if err := atomicfile.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return err
	}
	perm := fs.FileMode(0o600)
	if mode == filemode.Executable {
		perm = 0o700
	}
	return atomicfile.WriteFile(dst, data, perm)
}

// Rollback makes the work tree equal to revision rev and commits that as a
// new commit with message msg; history is never rewritten. It returns the
// new hash, or "" when the tree already equals rev. Like Commit, it first
// applies the commits staged and flushes the journal. It writes the files
// one by one: a crash in the middle leaves some of rev's files, which the
// next start commits as they are (lifecycle.Env.Rollback goes through
// Stage and Apply instead, and is all or nothing).
//
// It stops before changing anything when rev holds an entry it will not
// write (an *EntryError: a symbolic link, a submodule, a file too large, a
// path out of the work tree or into a .git) or the work tree holds one
// Commit refuses (an *atomicfile.RefusedError): a rollback is all of rev or
// nothing, so the error names the first such entry and the work tree is
// left as it was.
func (s *Store) Rollback(rev, msg string) (string, error) {
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	if err := s.lockSettled(); err != nil {
		return "", err
	}
	defer s.mu.Unlock()
	if err := s.writable("rollback to " + rev); err != nil {
		return "", err
	}
	c, err := s.resolve(rev)
	if err != nil {
		return "", err
	}
	tree, err := c.Tree()
	if err != nil {
		return "", err
	}
	// Check everything before writing anything.
	var want []*object.File
	err = tree.Files().ForEach(func(f *object.File) error {
		if err := s.checkEntry(rev, f); err != nil {
			return err
		}
		if err := s.checkWorkDirs(rev, f.Name); err != nil {
			return err
		}
		want = append(want, f)
		return nil
	})
	var ee *EntryError
	if err != nil && !errors.As(err, &ee) {
		// go-git's walk refuses some names itself (.., .git in any case).
		err = fmt.Errorf("gitstore: rollback to %s: its files cannot be listed: %w; nothing was written", rev, err)
	}
	if err != nil {
		return "", err
	}
	files, err := s.scan()
	if err != nil {
		return "", err
	}
	wanted := map[string]bool{}
	read := atomicfile.Reader{Root: s.dir, MaxSize: s.opts.MaxFileSize}
	for _, f := range want {
		wanted[f.Name] = true
		body, err := f.Contents()
		if err != nil {
			return "", err
		}
		cur, err := read.ReadFile(filepath.Join(s.dir, filepath.FromSlash(f.Name)))
		if err == nil && string(cur) == body {
			continue
		}
		if err := s.writeWork(f.Name, []byte(body), f.Mode); err != nil {
			return "", err
		}
	}
	for _, f := range files {
		if !wanted[f.path] {
			p := filepath.Join(s.dir, filepath.FromSlash(f.path))
			if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return "", err
			}
			if err := atomicfile.SyncDir(filepath.Dir(p)); err != nil {
				return "", err
			}
		}
	}
	return s.commit(msg)
}

// Tag makes an annotated tag name on the last commit (after applying the
// commits staged and flushing the journal, as Commit does). A tag of that name
// must not exist yet. A name of only hex digits is allowed and resolves to
// the tag, as in git, except one of 40, which is always a commit hash.
func (s *Store) Tag(name, msg string) error {
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	if err := s.lockSettled(); err != nil {
		return err
	}
	defer s.mu.Unlock()
	if err := s.writable("tag " + name); err != nil {
		return err
	}
	if err := plumbing.ReferenceName("refs/tags/" + name).Validate(); err != nil || name == "" || strings.ContainsAny(name, " ~^:?*[\\") {
		return fmt.Errorf("gitstore: tag name %q is not valid", name)
	}
	if len(name) == 40 && plumbing.IsHash(name) {
		return fmt.Errorf("gitstore: tag name %q is a full commit hash, which always names that commit, never the tag; choose another name", name)
	}
	head, err := s.headCommit()
	if err != nil {
		return err
	}
	if head == nil {
		return fmt.Errorf("gitstore: tag %q: %s has no commit yet", name, s.dir)
	}
	refName := "refs/tags/" + name
	if _, err := s.repo.Reference(plumbing.ReferenceName(refName), false); err == nil {
		return fmt.Errorf("gitstore: tag %q already exists in %s", name, s.dir)
	}
	tag := &object.Tag{Name: name, Message: msg, TargetType: plumbing.CommitObject, Target: head.Hash,
		Tagger: object.Signature{Name: s.opts.AuthorName, Email: s.opts.AuthorEmail, When: time.Now().Truncate(time.Second)}}
	obj := s.storage.NewEncodedObject()
	if err := tag.Encode(obj); err != nil {
		return err
	}
	b := &treeBuilder{s: s, write: true}
	h, err := b.store(obj)
	if err != nil {
		return err
	}
	if err := b.flush(); err != nil {
		return err
	}
	return s.writeRef(refName, h)
}
