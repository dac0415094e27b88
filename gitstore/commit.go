package gitstore

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/index"
	"github.com/go-git/go-git/v5/plumbing/format/objfile"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/mcpkeep/mcpkeep/atomicfile"
	"github.com/mcpkeep/mcpkeep/internal/failpoint"
)

// file is one work-tree file as it goes into a tree and the index.
type file struct {
	path string // slash-separated, relative to the work tree
	mode filemode.FileMode
	hash plumbing.Hash
	data []byte
	info fs.FileInfo
	kept bool // left out of a CommitChecked: HEAD's entry, already stored
}

// skip reports whether a work-tree entry is never versioned: .git, the
// directories a repair set aside next to it, and temporary files of
// interrupted atomic writes.
func skip(name string, top bool) bool {
	return name == ".git" || (top && strings.HasPrefix(name, ".git.")) || atomicfile.IsTemp(name)
}

// scan reads the work tree. An entry that is not a directory or a regular
// file (a symbolic link, a named pipe, a socket, a device), or a file
// larger than Options.MaxFileSize, is an *atomicfile.RefusedError naming
// it: gitstore versions regular files only, and neither follows a link
// nor waits on a pipe to read one.
func (s *Store) scan() ([]file, error) {
	files, _, err := s.scanLeaving(nil)
	return files, err
}

// scanLeaving is scan, except when left is not nil: an entry scan refuses
// is then not an error but goes into *left, and so does a file whose bytes
// differ from the index's and check (if not nil) refuses.
func (s *Store) scanLeaving(check func(path string, data []byte) error) ([]file, []LeftOut, error) {
	var files []file
	var left []LeftOut
	leaving := check != nil
	read := atomicfile.Reader{Root: s.dir, MaxSize: s.opts.MaxFileSize}
	err := filepath.WalkDir(s.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == s.dir {
			return nil
		}
		if skip(d.Name(), filepath.Dir(p) == s.dir) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		if !d.Type().IsRegular() {
			err := &atomicfile.RefusedError{Path: p, Mode: d.Type()}
			if leaving {
				left = append(left, LeftOut{Path: s.rel(p), Err: err})
				return nil
			}
			return err
		}
		// Stat before the read: a write in between leaves stat data older
		// than the bytes, which git notices, never the other way round.
		f := file{path: s.rel(p)}
		if f.info, err = os.Lstat(p); err != nil {
			return err
		}
		if f.data, err = read.ReadFile(p); err != nil {
			var re *atomicfile.RefusedError
			if leaving && errors.As(err, &re) {
				left = append(left, LeftOut{Path: f.path, Err: err})
				return nil
			}
			return err
		}
		f.mode = filemode.Regular
		if f.info.Mode()&0o111 != 0 {
			f.mode = filemode.Executable
		}
		f.hash = plumbing.ComputeHash(plumbing.BlobObject, f.data)
		if leaving {
			if e, ok := s.index[f.path]; !ok || e.Hash != f.hash {
				if err := check(f.path, f.data); err != nil {
					left = append(left, LeftOut{Path: f.path, Err: err})
					return nil
				}
			}
		}
		files = append(files, f)
		return nil
	})
	return files, left, err
}

// treeBuilder turns a sorted list of files into tree objects. When write
// is set it queues the objects (the blobs too) that the repository lacks;
// flush writes them all durably at once.
type treeBuilder struct {
	s       *Store
	write   bool
	pending []atomicfile.File // loose objects to write
	queued  map[plumbing.Hash]bool
}

func (b *treeBuilder) store(obj plumbing.EncodedObject) (plumbing.Hash, error) {
	h := obj.Hash()
	if !b.write || b.queued[h] {
		return h, nil
	}
	if err := b.s.repo.Storer.HasEncodedObject(h); err == nil {
		return h, nil // stored, or in memory and flushed or about to be
	}
	data, err := looseObject(obj)
	if err != nil {
		return h, err
	}
	if b.queued == nil {
		b.queued = map[plumbing.Hash]bool{}
	}
	b.queued[h] = true
	b.pending = append(b.pending, atomicfile.File{Path: b.s.objectPath(h), Data: data, Perm: 0o444})
	return h, nil
}

// flush writes the queued objects as loose objects, in one
// atomicfile.WriteFiles: every object is fsynced, and so is each fan-out
// directory it went into, before flush returns. go-git would write them one
// at a time, each file and directory fsync waiting for the last (through
// syncFS), which made a Commit of one changed file wait for some fifteen
// disk flushes in a row.
func (b *treeBuilder) flush() error {
	if len(b.pending) == 0 {
		return nil
	}
	objects := filepath.Join(b.s.gitDir, "objects")
	made := false // a fan-out directory, whose entry in objects/ is not durable yet
	for i := range b.pending {
		err := os.Mkdir(filepath.Dir(b.pending[i].Path), dirPerm)
		switch {
		case err == nil:
			made = true
		case !errors.Is(err, fs.ErrExist):
			return err
		}
		// Temporary files in objects/, not in the fan-out directories:
		// Open looks for those a crash left there, and only there.
		b.pending[i].TempDir = objects
	}
	if err := atomicfile.WriteFiles(b.pending...); err != nil {
		return err
	}
	// The new fan-out directories' entries, once for them all (fsyncing
	// objects/ after each mkdir was a quarter of a young repository's
	// Commit): before the ref names what is in them, as the objects are.
	if made {
		if err := atomicfile.SyncDir(objects); err != nil {
			return err
		}
	}
	if b.s.loose >= 0 { // else not counted yet: maybePack counts them
		b.s.loose += len(b.pending)
	}
	b.pending, b.queued = nil, nil
	return nil
}

// looseObject encodes obj as git stores a loose object: zlib-compressed
// "<type> <size>\x00<content>".
func looseObject(obj plumbing.EncodedObject) ([]byte, error) {
	r, err := obj.Reader()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var buf bytes.Buffer
	w := objfile.NewWriter(&buf)
	if err := w.WriteHeader(obj.Type(), obj.Size()); err != nil {
		return nil, err
	}
	if _, err := io.Copy(w, r); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// objectPath is where the loose object h lives.
func (s *Store) objectPath(h plumbing.Hash) string {
	hex := h.String()
	return filepath.Join(s.gitDir, "objects", hex[:2], hex[2:])
}

func (b *treeBuilder) blob(f file) error {
	if !b.write || f.kept {
		return nil
	}
	obj := b.s.storage.NewEncodedObject()
	obj.SetType(plumbing.BlobObject)
	w, err := obj.Writer()
	if err != nil {
		return err
	}
	if _, err := w.Write(f.data); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	_, err = b.store(obj)
	return err
}

// build returns the hash of the tree holding files, all under prefix.
func (b *treeBuilder) build(files []file, prefix string) (plumbing.Hash, error) {
	var entries []object.TreeEntry
	for i := 0; i < len(files); {
		rest := strings.TrimPrefix(files[i].path, prefix)
		name, _, isDir := strings.Cut(rest, "/")
		if !isDir {
			if err := b.blob(files[i]); err != nil {
				return plumbing.ZeroHash, err
			}
			entries = append(entries, object.TreeEntry{Name: name, Mode: files[i].mode, Hash: files[i].hash})
			i++
			continue
		}
		sub := prefix + name + "/"
		j := i
		for j < len(files) && strings.HasPrefix(files[j].path, sub) {
			j++
		}
		h, err := b.build(files[i:j], sub)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		entries = append(entries, object.TreeEntry{Name: name, Mode: filemode.Dir, Hash: h})
		i = j
	}
	// git sorts tree entries by name, comparing a directory as name + "/".
	sort.Slice(entries, func(i, j int) bool { return sortKey(entries[i]) < sortKey(entries[j]) })
	tree := &object.Tree{Entries: entries}
	obj := b.s.storage.NewEncodedObject()
	if err := tree.Encode(obj); err != nil {
		return plumbing.ZeroHash, err
	}
	return b.store(obj)
}

func sortKey(e object.TreeEntry) string {
	if e.Mode == filemode.Dir {
		return e.Name + "/"
	}
	return e.Name
}

// tree scans the work tree and returns its tree hash and files; b, when
// not nil, queues the objects to write.
func (s *Store) tree(b *treeBuilder) (plumbing.Hash, []file, error) {
	files, err := s.scan()
	if err != nil {
		return plumbing.ZeroHash, nil, err
	}
	sort.Slice(files, func(i, j int) bool { return files[i].path < files[j].path })
	if b == nil {
		b = &treeBuilder{s: s}
	}
	h, err := b.build(files, "")
	return h, files, err
}

// Dirty reports whether the work tree differs from the last commit (an
// empty repository with files is dirty).
func (s *Store) Dirty() (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, files, err := s.tree(nil)
	if err != nil {
		return false, err
	}
	c, err := s.headCommit()
	if err != nil {
		return false, err
	}
	if c == nil {
		return len(files) > 0, nil
	}
	return c.TreeHash != h, nil
}

// Commit records every change of the work tree (adds, edits, deletes) as a
// new commit with message msg and returns its hash, or "" and nil when the
// tree equals the last commit. When Commit returns, the commit is durable.
// It first applies the commits staged (Apply) and writes the journal to
// the repository (Flush).
func (s *Store) Commit(msg string) (string, error) {
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	if err := s.lockSettled(); err != nil {
		return "", err
	}
	defer s.mu.Unlock()
	return s.commit(msg)
}

// LeftOut is a file of the work tree that CommitChecked left out of its
// commit.
type LeftOut struct {
	Path string // slash-separated, relative to the work tree
	// Err says why: an *atomicfile.RefusedError for an entry gitstore
	// does not version (a symbolic link, a named pipe, a socket, a
	// device, a file over Options.MaxFileSize), or what check returned.
	Err error
}

// LeftOutError is CommitChecked's error when it left files out of its
// commit: the rest was committed (Commit; "" when nothing else changed),
// and each of Files is as the commit before had it (or not in the commit,
// when that one had no such file).
type LeftOutError struct {
	Commit string    // the commit of the rest; "" when nothing else changed
	Files  []LeftOut // what was left out, in the order a walk of the work tree meets it
}

// Error names the files left out and why.
func (e *LeftOutError) Error() string {
	parts := make([]string, len(e.Files))
	for i, f := range e.Files {
		parts[i] = f.Path + " (" + f.Err.Error() + ")"
	}
	return fmt.Sprintf("gitstore: left out of the commit: %s", strings.Join(parts, "; "))
}

// Unwrap returns each file's reason.
func (e *LeftOutError) Unwrap() []error {
	errs := make([]error, len(e.Files))
	for i, f := range e.Files {
		errs[i] = f.Err
	}
	return errs
}

// CommitChecked is Commit for a work tree that may hold what should not be
// committed: instead of failing the whole commit, it leaves out each
// entry Commit refuses (a symbolic link, a named pipe, a socket, a device,
// a file over Options.MaxFileSize) and each changed file whose bytes check
// refuses (check may be nil), commits the rest, and returns its hash with
// a *LeftOutError naming what it left out. A file left out stays as the
// last commit has it. check is called with the path, slash-separated and
// relative to the work tree, and the file's bytes, for each file that
// differs from the last commit, while the store is locked: it must not
// call the Store.
func (s *Store) CommitChecked(msg string, check func(path string, data []byte) error) (string, error) {
	if check == nil {
		check = func(string, []byte) error { return nil }
	}
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	if err := s.lockSettled(); err != nil {
		return "", err
	}
	defer s.mu.Unlock()
	return s.commitLeaving(msg, check)
}

// settle applies the commits staged and flushes the journal, for a method
// that writes the repository itself. The caller holds flushMu.
func (s *Store) settle() error {
	if s.opts.ReadOnly {
		return nil // the method's own check says so
	}
	s.mu.Lock()
	target := slices.Clone(s.staged)
	s.mu.Unlock()
	s.loopMu.Lock()
	s.runLoop(func() bool { return allDone(target) && s.renamed == nil })
	s.mu.Lock()
	for _, c := range target {
		if c.err != nil {
			s.mu.Unlock()
			return c.err
		}
	}
	s.mu.Unlock()
	return s.flush(true)
}

// lockSettled settles, then takes s.mu with no commit staged (one staged
// in between would be built on a HEAD the caller is about to move). The
// caller holds flushMu.
func (s *Store) lockSettled() error {
	for {
		if err := s.settle(); err != nil {
			return err
		}
		s.mu.Lock()
		if len(s.staged) == 0 {
			return nil
		}
		s.mu.Unlock()
	}
}

// commit is Commit, for a caller that holds s.mu and has settled.
func (s *Store) commit(msg string) (string, error) {
	return s.commitLeaving(msg, nil)
}

// commitLeaving is CommitChecked (Commit when check is nil), for a caller
// that holds s.mu and has settled.
func (s *Store) commitLeaving(msg string, check func(path string, data []byte) error) (string, error) {
	if err := s.writable("commit"); err != nil {
		return "", err
	}
	if err := failpoint.Hit("gitstore.before-objects"); err != nil {
		return "", fmt.Errorf("gitstore: commit in %s: %w", s.dir, err)
	}
	b := &treeBuilder{s: s, write: true}
	files, left, err := s.scanLeaving(check)
	if err == nil && len(left) > 0 {
		files, err = s.keepLeft(files, left)
	}
	var treeHash plumbing.Hash
	if err == nil {
		sort.Slice(files, func(i, j int) bool { return files[i].path < files[j].path })
		treeHash, err = b.build(files, "")
	}
	if err != nil {
		return "", fmt.Errorf("gitstore: commit in %s: %w", s.dir, err)
	}
	hash, err := s.commitTree(b, msg, treeHash, files)
	if err == nil && len(left) > 0 {
		err = &LeftOutError{Commit: hash, Files: left}
	}
	return hash, err
}

// keepLeft adds to files the last commit's entry of each path left out,
// where it has one: a file as it was, or every file of a directory.
func (s *Store) keepLeft(files []file, left []LeftOut) ([]file, error) {
	parent, err := s.headCommit()
	if err != nil || parent == nil {
		return files, err
	}
	for _, l := range left {
		// Component by component: a path the work tree has where the
		// commit had a file, or a name go-git's path check refuses, is
		// simply not in the commit.
		e, ok, err := s.entryAt(parent.TreeHash, l.Path)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		if e.Mode != filemode.Dir {
			files = append(files, file{path: l.Path, mode: e.Mode, hash: e.Hash, kept: true})
			continue
		}
		// A directory of the commit where the work tree has, say, a
		// link: its files stay.
		sub, err := s.repo.TreeObject(e.Hash)
		if err != nil {
			return nil, err
		}
		err = sub.Files().ForEach(func(f *object.File) error {
			files = append(files, file{path: l.Path + "/" + f.Name, mode: f.Mode, hash: f.Hash, kept: true})
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return files, nil
}

// commitTree makes the commit of treeHash, whose files are files, on HEAD:
// the rest of commitLeaving.
func (s *Store) commitTree(b *treeBuilder, msg string, treeHash plumbing.Hash, files []file) (string, error) {
	parent, err := s.headCommit()
	if err != nil {
		return "", err
	}
	if parent != nil && parent.TreeHash == treeHash {
		return "", nil
	}
	if parent == nil && len(files) == 0 {
		return "", nil
	}
	sig := object.Signature{Name: s.opts.AuthorName, Email: s.opts.AuthorEmail, When: time.Now().Truncate(time.Second)}
	c := &object.Commit{Author: sig, Committer: sig, Message: msg, TreeHash: treeHash}
	if parent != nil {
		c.ParentHashes = []plumbing.Hash{parent.Hash}
	}
	obj := s.storage.NewEncodedObject()
	if err := c.Encode(obj); err != nil {
		return "", err
	}
	h, err := b.store(obj)
	if err != nil {
		return "", fmt.Errorf("gitstore: commit in %s: %w", s.dir, err)
	}
	// The objects are durable before the ref can name them: two batches.
	if err := b.flush(); err != nil {
		return "", fmt.Errorf("gitstore: commit in %s: %w", s.dir, err)
	}
	if err := failpoint.Hit("gitstore.before-ref"); err != nil {
		return "", fmt.Errorf("gitstore: update %s in %s: %w", s.branch, s.dir, err)
	}
	// The ref's rename is the commit point. The index and the stamp (a
	// copy of the ref that Open repairs a broken ref from) are caches,
	// written after it without fsync: Open checks and rebuilds them.
	if err := s.writeRef(s.branch, h); err != nil {
		return "", err
	}
	s.setHead(h)
	s.followDisk()
	old := s.index
	s.index = make(map[string]*index.Entry, len(files))
	for _, f := range files {
		if e, ok := old[f.path]; f.kept && ok && e.Hash == f.hash {
			s.index[f.path] = e // its stat data still describes the version committed
			continue
		}
		s.index[f.path] = indexEntry(f)
	}
	if err := s.writeCaches(h, s.indexSnapshot()); err != nil {
		s.log.Warn("gitstore: writing the index failed; Open rebuilds it", "repo", s.dir, "err", err)
	}
	if s.maintained.Load() == 0 {
		if err := s.maybePack(); err != nil {
			// The commit is durable; packing is housekeeping.
			s.log.Warn("gitstore: packing loose objects failed; will retry", "repo", s.dir, "err", err)
		}
	}
	return h.String(), nil
}

// indexEntry is the index entry of a scanned file, with its stat data so
// that the git CLI sees a clean work tree without rehashing.
func indexEntry(f file) *index.Entry {
	e := &index.Entry{Name: f.path, Hash: f.hash, Mode: f.mode}
	if f.info != nil {
		e.ModifiedAt = f.info.ModTime()
		e.Size = uint32(f.info.Size())
		fillStat(e, f.info)
	}
	return e
}

// loadIndex loads the index for the flush, or rebuilds it from HEAD when
// it does not decode or is not the one the stamp names (a crash came
// between the flush's index and its stamp, or before a flush). Files
// are not hashed: a rebuilt index has no stat data, and the git CLI
// rehashes once.
func (s *Store) loadIndex() error {
	s.index = map[string]*index.Entry{}
	b, err := os.ReadFile(filepath.Join(s.gitDir, "index"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	var idx index.Index
	decoded := err == nil && index.NewDecoder(bytes.NewReader(b)).Decode(&idx) == nil
	// The index is HEAD's when the stamp says so, or, when not (the git
	// CLI refreshes an index's stat data and writes it anew), when its
	// entries are HEAD's files.
	fresh := decoded && (s.indexFresh(b) || s.indexIsHead(idx.Entries))
	if fresh {
		for _, e := range idx.Entries {
			s.index[e.Name] = e
		}
		return nil
	}
	if s.headHash.IsZero() {
		return nil // nothing committed: no index needed
	}
	if err := s.indexFromTree(); err != nil {
		return err
	}
	switch {
	case b == nil:
		s.repaired("rebuilt the missing .git/index from HEAD")
	case !decoded:
		s.repaired("rebuilt the unreadable .git/index (%d bytes) from HEAD", len(b))
	default:
		s.repaired("rebuilt .git/index, which was not the one of HEAD (a crash came before it was written)")
	}
	return nil
}

// indexIsHead reports whether entries are the files of HEAD's tree, with
// their blobs and modes.
func (s *Store) indexIsHead(entries []*index.Entry) bool {
	if s.headHash.IsZero() {
		return len(entries) == 0
	}
	c, err := s.repo.CommitObject(s.headHash)
	if err != nil {
		return false
	}
	want := make(map[string]*index.Entry, len(entries))
	for _, e := range entries {
		if e.Stage != 0 {
			return false
		}
		want[e.Name] = e
	}
	n := 0
	var walk func(h plumbing.Hash, prefix string) bool
	walk = func(h plumbing.Hash, prefix string) bool {
		tes, err := s.treeEntries(h)
		if err != nil {
			return false
		}
		for _, te := range tes {
			p := prefix + te.Name
			if te.Mode == filemode.Dir {
				if !walk(te.Hash, p+"/") {
					return false
				}
				continue
			}
			e, ok := want[p]
			if !ok || e.Hash != te.Hash || e.Mode != te.Mode {
				return false
			}
			n++
		}
		return true
	}
	return walk(c.TreeHash, "") && n == len(entries)
}

// indexFresh reports whether the stamp names HEAD and the index whose
// bytes are b. A stamp of one line (older versions) vouches for no index:
// a decoded index is taken.
func (s *Store) indexFresh(b []byte) bool {
	stamp, err := os.ReadFile(filepath.Join(s.gitDir, stampFile))
	if err != nil {
		return true
	}
	first, rest, _ := bytes.Cut(stamp, []byte("\n"))
	sum, ok := strings.CutPrefix(strings.TrimSpace(string(rest)), "index ")
	if !ok {
		return true
	}
	// "index -": a flush under load did not write the index.
	return sum != "-" && strings.TrimSpace(string(first)) == s.headHash.String() && sum == indexChecksum(b)
}

// indexFromTree makes the index kept for the flush that of HEAD's tree,
// without stat data.
func (s *Store) indexFromTree() error {
	c, err := s.repo.CommitObject(s.headHash)
	if err != nil {
		return err
	}
	tree, err := c.Tree()
	if err != nil {
		return err
	}
	err = tree.Files().ForEach(func(f *object.File) error {
		s.index[f.Name] = &index.Entry{Name: f.Name, Hash: f.Hash, Mode: f.Mode}
		return nil
	})
	s.indexDirty = true
	return err
}

// checkIndex is loadIndex for a ReadOnly store: it says what loadIndex
// would rebuild, but only for an index that does not decode, since beside
// a live server the index is often not yet the one of HEAD.
func (s *Store) checkIndex() error {
	b, err := os.ReadFile(filepath.Join(s.gitDir, "index"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err == nil {
		var idx index.Index
		if index.NewDecoder(bytes.NewReader(b)).Decode(&idx) == nil {
			return nil
		}
	}
	if s.headHash.IsZero() {
		return nil
	}
	if b == nil {
		s.repaired("rebuilt the missing .git/index from HEAD")
	} else {
		s.repaired("rebuilt the unreadable .git/index (%d bytes) from HEAD", len(b))
	}
	return nil
}
