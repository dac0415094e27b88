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
	// known are the versions the batches held the path at before the
	// last: its blob at their base (ZeroHash: none), and each one a
	// commit of theirs wrote before the last. A file holding one of them
	// is not in place yet; one holding anything else was changed by hand.
	known []plumbing.Hash
}

// finalFiles returns the paths commits (built one on another) write, as
// the last of them leaves each, in path order.
func finalFiles(commits []*Staged) []workFile {
	at := map[string]int{}
	var out []workFile
	for _, c := range commits {
		for _, ch := range c.changes {
			w := workFile{path: ch.path, blob: ch.blob, data: ch.data, remove: ch.blob.IsZero(), perm: ch.perm, mode: ch.mode}
			if i, ok := at[ch.path]; ok {
				w.known = append(out[i].known, out[i].blob)
				out[i] = w
				continue
			}
			w.known = []plumbing.Hash{ch.before}
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

// batch is what one Apply writes: its commits, and the files it puts in
// place, staged as temporary files.
type batch struct {
	commits []*Staged
	files   []workFile
	temps   *atomicfile.Batch
	dirs    []string // directories whose entries change besides the renamed files'
	flush   bool     // the journal has grown past what a store flushes by itself
}

// Apply makes every commit staged so far durable and puts their files in
// place in the work tree, in two ordered barriers (DESIGN.md, "Issue 20:
// the change path"): the batch's record in the journal and a temporary
// file for each path it writes, fsynced at once; then the renames and
// removals, and an fsync of each directory they changed. It returns
// when the last barrier has. Commits staged while it runs wait for the
// next Apply, whose first barrier may run while this one is in its
// second. The repository itself is written later, by Maintain or Close
// (Flush). Staged.Wait is Apply for concurrent callers: they share it.
//
// On an error before the first barrier returned, nothing was written:
// every commit staged so far, those staged during the call too, is
// dropped (each Staged's Result gives the error) and HEAD is unchanged.
// After it, the commits are durable: HEAD names the last, and when their
// files cannot all be put in place the error is an *UnfinishedError.
func (s *Store) Apply() error {
	s.applyMu.Lock()
	err, flush := s.applyHeld()
	s.boundJournal(flush)
	return err
}

// applyHeld is Apply for a caller that holds applyMu, which it gives up
// once the batch is durable: the next batch's first barrier may then
// overlap this one's second, which switchMu keeps in order. flush
// reports that the journal has grown past what a store flushes by itself.
func (s *Store) applyHeld() (err error, flush bool) {
	b, err := s.begin()
	if b == nil {
		s.releaseApply()
		return err, false
	}
	s.switchMu.Lock()
	s.releaseApply()
	err = s.finishBatch(b)
	s.switchMu.Unlock()
	return err, b.flush
}

// boundJournal flushes the journal when flush says it has grown past
// what a store flushes by itself: no Maintain runs.
func (s *Store) boundJournal(flush bool) {
	if !flush {
		return
	}
	if err := s.Flush(); err != nil {
		s.log.Warn("gitstore: flushing the journal failed; will retry", "repo", s.dir, "err", err)
	}
}

// releaseApply gives up applyMu and wakes the Waits that found it taken.
func (s *Store) releaseApply() {
	s.applyMu.Unlock()
	s.mu.Lock()
	close(s.applyFree)
	s.applyFree = make(chan struct{})
	s.mu.Unlock()
}

// Wait returns c's result (see Result) once Apply is done with it. A
// caller that finds no Apply at its first barrier applies every commit
// staged so far, so concurrent callers of Wait share barriers (group
// commit) and each gets its own commit's result.
func (c *Staged) Wait() error {
	s := c.s
	for {
		s.mu.Lock()
		state, free := c.state, s.applyFree
		s.mu.Unlock()
		switch state {
		case stagedWaiting:
			if s.applyMu.TryLock() {
				_, flush := s.applyHeld() // c's result is on c
				s.boundJournal(flush)
				continue
			}
			select { // an Apply at its first barrier, which began before c was staged
			case <-c.done:
			case <-free:
			}
		case stagedTaken:
			<-c.done
		default:
			s.mu.Lock()
			err := c.err
			s.mu.Unlock()
			return err
		}
	}
}

// begin takes the staged commits as a batch and makes it durable
// (barrier 1), holding applyMu. It returns nil when there was nothing to
// apply, or on an error, which dropped every commit staged.
func (s *Store) begin() (*batch, error) {
	s.mu.Lock()
	err := s.writable("apply")
	if err == nil && s.jr == nil {
		err = fmt.Errorf("gitstore: apply in %s: the store is closed", s.dir)
	}
	if err == nil {
		err = s.jr.broken
	}
	if err != nil {
		s.dropStaged(err)
		s.mu.Unlock()
		return nil, err
	}
	unfinished := s.unfinished != nil
	s.mu.Unlock()
	if unfinished {
		// No other change until the files of an earlier one are in place.
		s.switchMu.Lock()
		err := s.finishUnfinished()
		s.switchMu.Unlock()
		if err != nil {
			s.mu.Lock()
			s.dropStaged(err)
			s.mu.Unlock()
			return nil, err
		}
	}

	s.mu.Lock()
	b := &batch{commits: s.staged}
	s.staged = nil
	for _, c := range b.commits {
		c.state = stagedTaken
	}
	s.seq++
	rec := &journalRecord{Seq: s.seq, Branch: s.branch}
	s.mu.Unlock()
	if len(b.commits) == 0 {
		return nil, nil
	}
	fail := func(err error) (*batch, error) {
		if b.temps != nil {
			b.temps.Cleanup()
		}
		s.mu.Lock()
		for _, c := range b.commits {
			s.dropMem(c.added)
			c.resolve(stagedDropped, err)
		}
		s.dropStaged(err)
		s.mu.Unlock()
		return nil, err
	}

	if base := b.commits[0].parent; !base.IsZero() {
		rec.Base = base.String()
	}
	for _, c := range b.commits {
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
	b.files = finalFiles(b.commits)

	// The temporary files and the record; barrier 1.
	var writes []atomicfile.File
	for _, f := range b.files {
		abs := filepath.Join(s.dir, filepath.FromSlash(f.path))
		if f.remove {
			b.dirs = append(b.dirs, filepath.Dir(abs))
			continue
		}
		made, err := s.mkdirs(filepath.Dir(abs))
		if err != nil {
			return fail(err)
		}
		b.dirs = append(b.dirs, made...)
		// The temporary file goes beside its target, so that a directory
		// the server may not write fails the change here, before it is
		// durable, not at the rename. One a crash leaves is skipped by
		// Commit and Dirty, and removed by recovery.Run (or
		// atomicfile.CleanTemps).
		writes = append(writes, atomicfile.File{Path: abs, Data: f.data, Perm: f.perm})
	}
	if b.temps, err = atomicfile.Prepare(writes...); err != nil {
		return fail(err)
	}
	if err := failpoint.Hit("gitstore.before-intent"); err != nil {
		return fail(err)
	}
	off, err := s.jr.append(frame)
	if err == nil {
		err = b.temps.Sync(s.jr.file())
	}
	if err != nil {
		if uerr := s.jr.undo(off); uerr != nil {
			err = errors.Join(err, uerr)
		}
		return fail(err)
	}

	// Durable: the commits will happen, here or at the next Open.
	s.mu.Lock()
	s.setHead(b.commits[len(b.commits)-1].hash)
	s.records = append(s.records, &appliedRecord{rec: rec, added: addedOf(b.commits)})
	b.flush = len(s.records) >= maxJournalRecords
	s.mu.Unlock()
	return b, nil
}

// finishBatch puts the files of durable batch b in place (barrier 2),
// holding switchMu, after those of an earlier batch left unfinished.
func (s *Store) finishBatch(b *batch) error {
	defer b.temps.Cleanup()
	s.mu.Lock()
	earlier := s.unfinished
	s.mu.Unlock()
	if earlier != nil {
		// An earlier batch could not be put in place: both go together,
		// from their records' bytes, as Open would.
		s.mu.Lock()
		s.unfinished = &unfinishedBatch{commits: append(earlier.commits, b.commits...)}
		s.mu.Unlock()
		return s.finishUnfinished()
	}
	err := failpoint.Hit("gitstore.after-intent")
	if err == nil {
		err = b.temps.Rename()
	}
	for _, f := range b.files {
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
		err = b.temps.SyncDirs(b.dirs...)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		last := b.commits[len(b.commits)-1].hash
		ue := &UnfinishedError{Commit: last.String(), Err: err}
		s.unfinished = &unfinishedBatch{commits: b.commits}
		for _, c := range b.commits {
			c.resolve(stagedDurable, ue)
		}
		return ue
	}
	for _, c := range b.commits {
		c.resolve(stagedApplied, nil)
	}
	s.indexFiles(b.files)
	s.kickMaintain()
	return nil
}

// maxJournalRecords is how many records a store that no Maintain flushes
// lets the journal hold before Apply flushes it.
const maxJournalRecords = 1024

// appliedRecord is a record of the journal not yet flushed, with the
// objects its commits added to memory (and, from Open, its commits).
type appliedRecord struct {
	rec     *journalRecord
	added   []plumbing.Hash
	commits []*Staged
}

func addedOf(commits []*Staged) []plumbing.Hash {
	var out []plumbing.Hash
	for _, c := range commits {
		out = append(out, c.added...)
	}
	return out
}

// unfinishedBatch is the commits of durable batches whose files are not
// all in place.
type unfinishedBatch struct {
	commits []*Staged
}

// finishUnfinished puts the files of the unfinished batches in place, as
// Open would, holding switchMu. Until it succeeds, their commits'
// result is an *UnfinishedError.
func (s *Store) finishUnfinished() error {
	s.mu.Lock()
	u := s.unfinished
	s.mu.Unlock()
	if u == nil {
		return nil
	}
	files := finalFiles(u.commits)
	last := u.commits[len(u.commits)-1].hash
	_, err := s.rollForward(files)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		ue := &UnfinishedError{Commit: last.String(), Err: err}
		for _, c := range u.commits {
			c.resolve(stagedDurable, ue)
		}
		return ue
	}
	s.unfinished = nil
	s.indexFiles(files)
	for _, c := range u.commits {
		c.resolve(stagedApplied, nil) // in place now
	}
	return nil
}

// dropStaged drops every commit waiting for an Apply, with err as their
// result, and takes the tip back to HEAD. The caller holds s.mu.
func (s *Store) dropStaged(err error) {
	for _, c := range s.staged {
		s.dropMem(c.added)
		c.resolve(stagedDropped, fmt.Errorf("gitstore: an earlier change this one was built on failed, so it was not made: %w", err))
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

// rollForward puts files in place as durable batches leave them, judging
// each by what it holds: the batches' last bytes, left; bytes they held
// it at before (or nothing, where they had none), replaced; anything
// else, a hand edit, left for a commit of hand edits. It returns the
// paths it changed.
func (s *Store) rollForward(files []workFile) ([]string, error) {
	var writes []atomicfile.File
	var changed, dirs []string
	for _, f := range files {
		abs := filepath.Join(s.dir, filepath.FromSlash(f.path))
		need, err := needsRollForward(abs, f)
		if err != nil {
			return changed, err
		}
		if !need {
			continue
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

// needsRollForward reports whether the file at abs holds one of f's
// earlier versions (its blob, or ZeroHash for none), not its last.
func needsRollForward(abs string, f workFile) (bool, error) {
	cur, exists, err := blobOf(abs)
	if err != nil {
		return false, err
	}
	if !exists {
		cur = plumbing.ZeroHash
	}
	final := f.blob
	if f.remove {
		final = plumbing.ZeroHash
	}
	return cur != final && slices.Contains(f.known, cur), nil
}

// notRegular stands for what a path holds when it is there but is not a
// regular file: no version a batch wrote, so a hand edit to it.
var notRegular = plumbing.ComputeHash(plumbing.BlobObject, []byte("gitstore: not a regular file"))

// blobOf returns the blob hash of the file at path, and whether there is
// one (notRegular for a symbolic link, a directory or a device).
func blobOf(path string) (plumbing.Hash, bool, error) {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return plumbing.ZeroHash, false, nil
	}
	if err != nil {
		return plumbing.ZeroHash, false, err
	}
	if !fi.Mode().IsRegular() {
		return notRegular, true, nil
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
