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

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/index"

	"github.com/mcpkeep/mcpkeep/atomicfile"
	"github.com/mcpkeep/mcpkeep/internal/barrier"
	"github.com/mcpkeep/mcpkeep/internal/failpoint"
)

// emptyTree is the hash of the tree with no entries.
var emptyTree = plumbing.NewHash("4b825dc642cb6eb9a060e54bf8d69288fbee4904")

// UnfinishedError reports commits that are durable (the journal holds
// them, and HEAD names the last) but whose files are not all in place in
// the work tree. The next Apply, and otherwise the next Open, puts them
// in place; until then the store makes no other change.
type UnfinishedError struct {
	Commit string // the last commit of the batch
	Err    error  // why the files could not all be put in place
}

// Error says what happened and what will.
func (e *UnfinishedError) Error() string {
	return fmt.Sprintf("gitstore: commit %s is durable, but its files are not all in place yet (%v); "+
		"the next change, or the next start, puts them in place", e.Commit, e.Err)
}

// Unwrap returns the cause.
func (e *UnfinishedError) Unwrap() error { return e.Err }

// workFile is one path of the work tree as a batch leaves it.
type workFile struct {
	path   string // slash-separated
	blob   plumbing.Hash
	data   []byte // nil when removed
	remove bool
	perm   fs.FileMode
	mode   filemode.FileMode
	before plumbing.Hash // the blob at the batch's base; ZeroHash: none
}

// finalFiles returns the paths a batch of commits writes, as the last of
// them leaves each, in path order, with the blob each had before the
// first.
func finalFiles(batch []*Staged) []workFile {
	at := map[string]int{}
	var out []workFile
	for _, c := range batch {
		for _, ch := range c.changes {
			w := workFile{path: ch.path, blob: ch.blob, data: ch.data, remove: ch.blob.IsZero(), perm: ch.perm, mode: ch.mode, before: ch.before}
			if i, ok := at[ch.path]; ok {
				w.before = out[i].before
				out[i] = w
				continue
			}
			at[ch.path] = len(out)
			out = append(out, w)
		}
	}
	slices.SortFunc(out, func(a, b workFile) int {
		switch {
		case a.path < b.path:
			return -1
		case a.path > b.path:
			return 1
		}
		return 0
	})
	return out
}

// Apply makes every commit staged so far durable and puts their files in
// place in the work tree, in two ordered barriers (DESIGN.md, "Issue 20:
// the change path"): the batch's record in the journal and a temporary
// file for each path it writes, fsynced at once; then the renames and
// removals, and an fsync of each directory they changed. It returns
// when the last barrier has. Commits staged while it runs wait for the
// next Apply. The repository itself is written later, by Maintain or
// Close (Flush).
//
// On an error before the first barrier returned, nothing was written:
// every commit staged so far, those staged during the call too, is
// dropped (each Staged's Result gives the error) and HEAD is unchanged.
// After it, the commits are durable: HEAD names the last, and when their
// files cannot all be put in place the error is an *UnfinishedError.
func (s *Store) Apply() error {
	s.applyMu.Lock()
	err, flush := s.apply()
	s.applyMu.Unlock()
	if flush {
		// No Maintain flushes this store: bound the journal here.
		if ferr := s.Flush(); ferr != nil {
			s.log.Warn("gitstore: flushing the journal failed; will retry", "repo", s.dir, "err", ferr)
		}
	}
	return err
}

// apply is Apply, holding applyMu. flush reports that the journal has
// grown past what a store flushes by itself.
func (s *Store) apply() (err error, flush bool) {
	s.mu.Lock()
	if err := s.writable("apply"); err != nil {
		s.mu.Unlock()
		return err, false
	}
	if s.jr == nil {
		s.mu.Unlock()
		return fmt.Errorf("gitstore: apply in %s: the store is closed", s.dir), false
	}
	if s.jr.broken != nil {
		err := s.jr.broken
		s.dropStaged(err)
		s.mu.Unlock()
		return err, false
	}
	unfinished := s.unfinished
	s.mu.Unlock()
	if unfinished != nil {
		if err := s.finish(unfinished); err != nil {
			s.mu.Lock()
			s.dropStaged(err)
			s.mu.Unlock()
			return err, false
		}
	}

	s.mu.Lock()
	batch := s.staged
	s.staged = nil
	s.seq++
	rec := &journalRecord{Seq: s.seq, Branch: s.branch}
	s.mu.Unlock()
	if len(batch) == 0 {
		return nil, false
	}
	fail := func(err error) (error, bool) {
		s.mu.Lock()
		for _, c := range batch {
			s.dropMem(c.added)
			c.state, c.err = stagedDropped, err
		}
		s.dropStaged(err)
		s.mu.Unlock()
		return err, false
	}

	if !batch[0].parent.IsZero() {
		rec.Base = batch[0].parent.String()
	}
	for _, c := range batch {
		jc := journalCommit{Object: c.object}
		for _, ch := range c.changes {
			jch := journalChange{Path: ch.path}
			if !ch.blob.IsZero() {
				jch.Blob, jch.Mode, jch.Perm = ch.blob.String(), uint32(ch.mode), uint32(ch.perm)
				if slices.Contains(c.added, ch.blob) {
					rec.Blobs = append(rec.Blobs, ch.data)
				}
			}
			jc.Changes = append(jc.Changes, jch)
		}
		rec.Commits = append(rec.Commits, jc)
	}
	frame, err := encodeRecord(rec)
	if err != nil {
		return fail(err)
	}
	files := finalFiles(batch)

	// Step 1: the temporary files and the record; barrier 1.
	var writes []atomicfile.File
	var dirs []string // directories whose entries change besides the renamed files'
	for _, f := range files {
		abs := filepath.Join(s.dir, filepath.FromSlash(f.path))
		if f.remove {
			dirs = append(dirs, filepath.Dir(abs))
			continue
		}
		made, err := s.mkdirs(filepath.Dir(abs))
		if err != nil {
			return fail(err)
		}
		dirs = append(dirs, made...)
		// The temporary file goes beside its target, so that a directory
		// the server may not write fails the change here, before it is
		// durable, not at the rename. One a crash leaves is skipped by
		// Commit and Dirty, and removed by recovery.Run (or
		// atomicfile.CleanTemps).
		writes = append(writes, atomicfile.File{Path: abs, Data: f.data, Perm: f.perm})
	}
	b, err := atomicfile.Prepare(writes...)
	if err != nil {
		return fail(err)
	}
	defer b.Cleanup()
	if err := failpoint.Hit("gitstore.before-intent"); err != nil {
		return fail(err)
	}
	off, err := s.jr.append(frame)
	if err == nil {
		err = b.Sync(s.jr.file())
	}
	if err != nil {
		if uerr := s.jr.undo(off); uerr != nil {
			err = errors.Join(err, uerr)
		}
		return fail(err)
	}

	// Durable: the commits will happen, here or at the next Open.
	s.mu.Lock()
	last := batch[len(batch)-1]
	s.setHead(last.hash)
	s.records = append(s.records, &appliedRecord{rec: rec, added: addedOf(batch)})
	flush = len(s.records) >= maxJournalRecords
	s.mu.Unlock()

	// Step 2: the renames and removals; barrier 2.
	err = failpoint.Hit("gitstore.after-intent")
	if err == nil {
		err = b.Rename()
	}
	for _, f := range files {
		if err == nil && f.remove {
			if rerr := os.Remove(filepath.Join(s.dir, filepath.FromSlash(f.path))); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
				err = rerr
			}
		}
	}
	if err == nil {
		err = failpoint.Hit("gitstore.before-barrier-2")
	}
	if err == nil {
		err = b.SyncDirs(dirs...)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		ue := &UnfinishedError{Commit: last.hash.String(), Err: err}
		s.unfinished = &unfinishedBatch{files: files, err: ue, batch: batch}
		for _, c := range batch {
			c.state, c.err = stagedDurable, ue
		}
		return ue, flush
	}
	for _, c := range batch {
		c.state = stagedApplied
	}
	s.indexFiles(files)
	s.kickMaintain()
	return nil, flush
}

// maxJournalRecords is how many records a store that no Maintain flushes
// lets the journal hold before Apply flushes it.
const maxJournalRecords = 1024

// appliedRecord is a record of the journal not yet flushed, with the
// objects its commits added to memory.
type appliedRecord struct {
	rec   *journalRecord
	added []plumbing.Hash
}

func addedOf(batch []*Staged) []plumbing.Hash {
	var out []plumbing.Hash
	for _, c := range batch {
		out = append(out, c.added...)
	}
	return out
}

// unfinishedBatch is a durable batch whose files are not all in place.
type unfinishedBatch struct {
	files []workFile
	err   *UnfinishedError
	batch []*Staged
}

// finish puts the files of a durable batch in place, as Open would.
func (s *Store) finish(u *unfinishedBatch) error {
	if _, err := s.rollForward(u.files); err != nil {
		return fmt.Errorf("%s; putting them in place failed again: %w", u.err.Error(), err)
	}
	s.mu.Lock()
	s.unfinished = nil
	s.indexFiles(u.files)
	for _, c := range u.batch {
		c.state, c.err = stagedApplied, nil // in place now
	}
	s.mu.Unlock()
	return nil
}

// dropStaged drops every commit waiting for an Apply, with err as their
// result, and takes the tip back to HEAD. The caller holds s.mu.
func (s *Store) dropStaged(err error) {
	for _, c := range s.staged {
		s.dropMem(c.added)
		c.state, c.err = stagedDropped, fmt.Errorf("gitstore: an earlier change this one was built on failed, so it was not made: %w", err)
	}
	s.staged = nil
	s.tip = s.headHash
	s.tipTree = plumbing.ZeroHash
	if !s.headHash.IsZero() {
		if c, err := s.repo.CommitObject(s.headHash); err == nil {
			s.tipTree = c.TreeHash
		}
	}
}

// mkdirs creates dir and its missing parents inside the work tree (0700),
// not durably, and returns the directories whose entries it changed: the
// parent of each one it made. Barrier 2 fsyncs them.
func (s *Store) mkdirs(dir string) ([]string, error) {
	var made []string
	for d := dir; d != s.dir && len(d) > len(s.dir); d = filepath.Dir(d) {
		if _, err := os.Lstat(d); err == nil {
			break
		}
		made = append(made, d)
	}
	var changed []string
	for i := len(made) - 1; i >= 0; i-- {
		if err := os.Mkdir(made[i], 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, err
		}
		changed = append(changed, filepath.Dir(made[i]))
	}
	return changed, nil
}

// rollForward puts files in place as a durable batch leaves them, judging
// each by what it holds: the batch's bytes, left; the bytes before the
// batch (or nothing, where it had none), replaced; anything else, a hand
// edit, left for a commit of hand edits. It returns the paths it changed.
func (s *Store) rollForward(files []workFile) ([]string, error) {
	var writes []atomicfile.File
	var changed, dirs []string
	for _, f := range files {
		abs := filepath.Join(s.dir, filepath.FromSlash(f.path))
		cur, exists, err := blobOf(abs)
		if err != nil {
			return changed, err
		}
		switch {
		case f.remove && !exists, !f.remove && exists && cur == f.blob:
			continue // in place
		case exists && cur != f.before, !exists && !f.before.IsZero():
			continue // changed by hand since: not the batch's to touch
		}
		changed = append(changed, f.path)
		if f.remove {
			if err := os.Remove(abs); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return changed, err
			}
			dirs = append(dirs, filepath.Dir(abs))
			continue
		}
		made, err := s.mkdirs(filepath.Dir(abs))
		if err != nil {
			return changed, err
		}
		dirs = append(dirs, made...)
		writes = append(writes, atomicfile.File{Path: abs, Data: f.data, Perm: f.perm})
	}
	if err := atomicfile.WriteFiles(writes...); err != nil {
		return changed, err
	}
	slices.Sort(dirs)
	dirs = slices.Compact(dirs)
	ops := make([]barrier.Op, len(dirs))
	for i, d := range dirs {
		ops[i] = barrier.DirOp(d)
	}
	return changed, barrier.Sync(ops...)
}

// blobOf returns the blob hash of the regular file at path, and whether
// there is one (a symbolic link or a directory counts as none to a
// batch, which writes files).
func blobOf(path string) (plumbing.Hash, bool, error) {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return plumbing.ZeroHash, false, nil
	}
	if err != nil {
		return plumbing.ZeroHash, false, err
	}
	if !fi.Mode().IsRegular() {
		return plumbing.ZeroHash, true, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return plumbing.ZeroHash, false, err
	}
	return plumbing.ComputeHash(plumbing.BlobObject, data), true, nil
}

// indexFiles brings the index kept for the flush up to date with files,
// now in place. The caller holds s.mu.
func (s *Store) indexFiles(files []workFile) {
	for _, f := range files {
		if f.remove {
			delete(s.index, f.path)
			continue
		}
		e := &index.Entry{Name: f.path, Hash: f.blob, Mode: f.mode}
		if info, err := os.Lstat(filepath.Join(s.dir, filepath.FromSlash(f.path))); err == nil {
			e.ModifiedAt = info.ModTime()
			e.Size = uint32(info.Size())
			fillStat(e, info)
		}
		s.index[f.path] = e
	}
	s.indexDirty = true
}

// objectContents returns the contents of obj, without git's header.
func objectContents(obj plumbing.EncodedObject) ([]byte, error) {
	r, err := obj.Reader()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var buf bytes.Buffer
	if _, err := io.Copy(&buf, r); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
