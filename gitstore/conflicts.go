package gitstore

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/mcpkeep/mcpkeep/atomicfile"
)

// ConflictTagPrefix starts the name of every tag a merge makes for the
// files both sides changed: conflicts/<UTC time>.
const ConflictTagPrefix = "conflicts/"

// The trailer lines of a merge commit's and a conflict tag's message.
const (
	trailerConflict = "Conflict: "
	trailerRefused  = "Refused: "
	trailerTag      = "Conflict-Tag: "
	trailerKept     = "Kept: "          // KeptRemote, when the tree took the remote's versions
	trailerMerged   = "Remote-Commit: " // the remote's commit, when the tag is on this store's
)

// Conflict is one merge of files both this store and the remote changed,
// as its conflicts/<time> tag records it.
type Conflict struct {
	Tag    string    `json:"tag"`    // conflicts/<time>
	When   time.Time `json:"when"`   // when the merge made it
	Remote string    `json:"remote"` // the remote's commit the merge took
	// Kept is whose version of Files the tree holds: KeptHome (the tag
	// is on the remote's commit) or KeptRemote (RemoteSync: the tag is
	// on this store's commit before the merge).
	Kept string `json:"kept"`
	// Files lists the files both sides changed; `git show <tag>:<file>`
	// shows the version the tree did not keep.
	Files []string `json:"files,omitempty"`
	// Refused lists the remote's entries gitstore would not write, each
	// "path (what it is)".
	Refused []string `json:"refused,omitempty"`
}

// Conflicts lists the conflicts/<time> tags, oldest first: merges whose
// files a person should look at (the remote's version against the one
// kept). ResolveConflict removes one once they have.
func (s *Store) Conflicts() ([]Conflict, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conflicts()
}

// conflicts is Conflicts for a caller holding s.mu.
func (s *Store) conflicts() ([]Conflict, error) {
	names, err := s.conflictRefs()
	if err != nil {
		return nil, err
	}
	var out []Conflict
	for _, name := range names {
		ref, err := s.repo.Reference(name, false)
		if err != nil || ref.Type() != plumbing.HashReference {
			continue // removed meanwhile, or not one of ours
		}
		tag, err := s.repo.TagObject(ref.Hash())
		if err != nil {
			continue // not one of ours: a lightweight tag someone made
		}
		c := Conflict{Tag: name.Short(), When: tag.Tagger.When, Remote: tag.Target.String(), Kept: KeptHome}
		if trailerValue(tag.Message, trailerKept) == KeptRemote {
			c.Kept, c.Remote = KeptRemote, trailerValue(tag.Message, trailerMerged)
		}
		c.Files, c.Refused = trailers(tag.Message)
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b Conflict) int { return strings.Compare(a.Tag, b.Tag) })
	return out, nil
}

// conflictRefs lists the refs under refs/tags/conflicts/, loose and
// packed, without reading any other ref (a broken branch ref, which Open
// repairs in memory only for a ReadOnly store, must not stop the list).
func (s *Store) conflictRefs() ([]plumbing.ReferenceName, error) {
	seen := map[plumbing.ReferenceName]bool{}
	var out []plumbing.ReferenceName
	add := func(name string) {
		n := plumbing.ReferenceName(name)
		if !seen[n] && n.Validate() == nil {
			seen[n] = true
			out = append(out, n)
		}
	}
	root := filepath.Join(s.gitDir, "refs", "tags", strings.TrimSuffix(ConflictTagPrefix, "/"))
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil || !d.Type().IsRegular() || IsTemp(d.Name()) {
			return err
		}
		rel, err := filepath.Rel(s.gitDir, p)
		if err == nil {
			add(filepath.ToSlash(rel))
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	packed, err := os.ReadFile(filepath.Join(s.gitDir, "packed-refs"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	for line := range strings.SplitSeq(string(packed), "\n") {
		if _, name, ok := strings.Cut(strings.TrimSpace(line), " "); ok && strings.HasPrefix(name, "refs/tags/"+ConflictTagPrefix) {
			add(name)
		}
	}
	return out, nil
}

// writeTrailers writes a Conflict line for each conflict of p and a
// Refused line for each refusal. A path a remote chose that holds a
// control character or is not UTF-8 is written quoted, Go-style: it must
// not start a line of its own.
func writeTrailers(b *strings.Builder, p *integrationPlan) {
	for _, c := range p.conflicts {
		fmt.Fprintf(b, "%s%s\n", trailerConflict, displayPath(c))
	}
	for _, c := range p.refused {
		fmt.Fprintf(b, "%s%s\n", trailerRefused, displayPath(c))
	}
}

// displayPath returns p, quoted when it holds a control character or is
// not valid UTF-8.
func displayPath(p string) string {
	if !utf8.ValidString(p) || strings.ContainsFunc(p, unicode.IsControl) {
		return strconv.Quote(p)
	}
	return p
}

// trailers returns the Conflict and Refused trailer values of msg.
func trailers(msg string) (conflicts, refused []string) {
	for line := range strings.SplitSeq(msg, "\n") {
		if v, ok := strings.CutPrefix(line, trailerConflict); ok {
			conflicts = append(conflicts, strings.TrimSpace(v))
		} else if v, ok := strings.CutPrefix(line, trailerRefused); ok {
			refused = append(refused, strings.TrimSpace(v))
		}
	}
	return conflicts, refused
}

// trailerValue returns the value of the first trailer line key in msg.
func trailerValue(msg, key string) string {
	for line := range strings.SplitSeq(msg, "\n") {
		if v, ok := strings.CutPrefix(line, key); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// conflictTag makes (or finds, when an earlier attempt at the same merge
// made it) the tag conflicts/<time> on the commit of plan p whose
// versions the tree does not keep (the remote's, or ours when p takes
// the remote's versions), durably, and returns its name. The caller
// holds s.mu.
func (s *Store) conflictTag(p *integrationPlan, remote string) (string, error) {
	existing, err := s.conflicts()
	if err != nil {
		return "", err
	}
	for _, c := range existing {
		if c.Remote == p.theirs.String() {
			return c.Tag, nil
		}
	}
	now := time.Now().UTC()
	name := ConflictTagPrefix + now.Format("20060102T150405Z")
	for i := 2; ; i++ {
		if _, err := s.repo.Reference(plumbing.ReferenceName("refs/tags/"+name), false); errors.Is(err, plumbing.ErrReferenceNotFound) {
			break
		}
		name = fmt.Sprintf("%s%s-%d", ConflictTagPrefix, now.Format("20060102T150405Z"), i)
	}
	var b strings.Builder
	target := p.theirs
	if p.kept() == KeptRemote && len(p.conflicts) > 0 {
		target = p.ours
		fmt.Fprintf(&b, "merge of %s at %s took the remote's version of files this home changed too; "+
			"this home's versions are in this tag's commit (git show %s:<file>)\n\n", remote, short7(p.theirs), name)
		fmt.Fprintf(&b, "%s%s\n%s%s\n", trailerKept, KeptRemote, trailerMerged, p.theirs)
	} else {
		fmt.Fprintf(&b, "merge of %s at %s kept this home's version of files the remote changed too; "+
			"the remote's versions are in this tag's commit (git show %s:<file>)\n\n", remote, short7(p.theirs), name)
	}
	writeTrailers(&b, p)
	tag := &object.Tag{Name: name, Message: b.String(), TargetType: plumbing.CommitObject, Target: target,
		Tagger: object.Signature{Name: s.opts.AuthorName, Email: s.opts.AuthorEmail, When: now.Truncate(time.Second)}}
	obj := s.storage.NewEncodedObject()
	if err := tag.Encode(obj); err != nil {
		return "", err
	}
	tb := &treeBuilder{s: s, write: true}
	h, err := tb.store(obj)
	if err != nil {
		return "", err
	}
	if err := tb.flush(); err != nil {
		return "", fmt.Errorf("gitstore: write the tag %s: %w", name, err)
	}
	if err := s.writeRef("refs/tags/"+name, h); err != nil {
		return "", fmt.Errorf("gitstore: write the tag %s: %w", name, err)
	}
	return name, nil
}

// ResolveConflict removes the tag conflicts/<time> named tag, once a
// person has settled the files it lists: the merge commit still records
// both versions. A name that is not a conflict tag is an error.
func (s *Store) ResolveConflict(tag string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.writable("resolve conflict " + tag); err != nil {
		return err
	}
	tag = strings.TrimPrefix(tag, "refs/tags/")
	if !strings.HasPrefix(tag, ConflictTagPrefix) || plumbing.ReferenceName("refs/tags/"+tag).Validate() != nil {
		return fmt.Errorf("gitstore: %q is not a conflict tag (they are named %s<time>; mcpkeep sync lists them)", tag, ConflictTagPrefix)
	}
	path := filepath.Join(s.gitDir, "refs", "tags", filepath.FromSlash(tag))
	if err := os.Remove(path); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("gitstore: no conflict tag %s in %s (mcpkeep sync lists them): %w", tag, s.dir, fs.ErrNotExist)
		}
		return err
	}
	return atomicfile.SyncDir(filepath.Dir(path))
}

// mergeConflicts returns the conflicted and refused files a merge commit's
// message records, and its conflict tag.
func mergeConflicts(c *object.Commit) (files []string, tag string) {
	if c.NumParents() < 2 {
		return nil, ""
	}
	conflicts, refused := trailers(c.Message)
	for _, r := range refused {
		if i := strings.LastIndex(r, " ("); i >= 0 {
			r = r[:i]
		}
		conflicts = append(conflicts, r)
	}
	return conflicts, trailerValue(c.Message, trailerTag)
}
