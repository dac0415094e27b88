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
	"time"

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

// batch is what one barrier makes durable: its commits, and the files it
// puts in place, staged as temporary files.
type batch struct {
	seq     uint64 // of its journal record
	rec     *journalRecord
	commits []*Staged
	files   []workFile
	temps   *atomicfile.Batch
	dirs    []string // directories whose entries change besides the renamed files'
}

// Apply makes every commit staged so far durable and puts their files in
// place in the work tree, in two ordered barriers (DESIGN.md, "Issue 20:
// the change path"): the batch's record in the journal and a temporary
// file for each path it writes, fsynced at once; then the renames and
// removals, and an fsync of each directory they changed. It returns when
// the last barrier has. Under load one barrier serves two batches: the
// second barrier of one is the first of the next (Staged.Wait, which is
// Apply for concurrent callers: they share it). The repository itself is
// written later, by Maintain or Close (Flush).
//
// On an error before the first barrier returned, nothing was written:
// every commit staged so far, those staged during the call too, is
// dropped (each Staged's Result gives the error) and HEAD is unchanged.
// After it, the commits are durable: HEAD names the last, and when their
// files cannot all be put in place the error is an *UnfinishedError.
func (s *Store) Apply() error {
	s.mu.Lock()
	target := slices.Clone(s.staged)
	s.mu.Unlock()
	s.loopMu.Lock()
	if err := s.finishUnfinished(); err != nil {
		s.mu.Lock()
		s.dropStaged(err)
		s.mu.Unlock()
	}
	s.runLoop(func() bool { return allDone(target) && s.renamed == nil })
	s.boundJournal()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range target {
		if c.err != nil {
			return c.err
		}
	}
	if len(target) == 0 && s.unfinished != nil {
		return &UnfinishedError{Commit: s.unfinished.commits[len(s.unfinished.commits)-1].hash.String(), Err: s.unfinishedErr}
	}
	return nil
}

// boundJournal flushes the journal when it has grown past what a store
// flushes by itself: no Maintain runs.
func (s *Store) boundJournal() {
	s.mu.Lock()
	due := s.flushDue
	s.flushDue = false
	s.mu.Unlock()
	if !due {
		return
	}
	if err := s.Flush(); err != nil {
		s.log.Warn("gitstore: flushing the journal failed; will retry", "repo", s.dir, "err", err)
	}
}

// allDone reports whether Apply is done with every commit of cs. The
// caller holds s.mu.
func allDone(cs []*Staged) bool {
	for _, c := range cs {
		if c.state == stagedWaiting || c.state == stagedTaken {
			return false
		}
	}
	return true
}

// Wait returns c's result (see Result) once Apply is done with it: once
// its batch's first barrier has made it durable and its files are renamed
// into place (the second barrier, which makes the renames durable, may
// still be to come; Apply waits for it). A caller that finds no one
// applying applies every commit staged so far; one that finds a caller or
// the store's committer applying waits for it. Concurrent callers of Wait
// so share barriers (group commit), and each gets its own commit's result.
func (c *Staged) Wait() error {
	s := c.s
	for {
		s.mu.Lock()
		done, err, free := c.resolved, c.err, s.loopFree
		s.mu.Unlock()
		if done {
			return err
		}
		if s.loopMu.TryLock() {
			s.runLoop(func() bool { return c.resolved })
			s.boundJournal()
			continue
		}
		select {
		case <-c.done:
		case <-free: // whoever applied has stopped: apply, or wait for the next
		}
	}
}

// runLoop makes barriers, holding loopMu (which it gives up), until
// until (called under s.mu) holds or nothing is left to do. Work left
// then goes to the store's committer, a goroutine that makes barriers as
// long as there are commits to apply: under load the caller that started
// applying returns once its own commit is done, and the barriers go on
// without a pause.
func (s *Store) runLoop(until func() bool) {
	for {
		s.mu.Lock()
		stop := until()
		s.mu.Unlock()
		if stop || !s.iterate() {
			break
		}
	}
	s.mu.Lock()
	if (len(s.staged) > 0 || s.renamed != nil) && !s.committer {
		s.committer = true
		s.commitWG.Add(1)
		go s.commitLoop()
	}
	s.mu.Unlock()
	s.releaseLoop()
}

// commitLoop is the committer: it makes barriers while there are commits
// to apply. Close waits for it.
func (s *Store) commitLoop() {
	defer s.commitWG.Done()
	for {
		s.loopMu.Lock()
		for s.iterate() {
		}
		s.mu.Lock()
		more := len(s.staged) > 0 || s.renamed != nil
		if !more {
			s.committer = false
		}
		s.mu.Unlock()
		s.releaseLoop()
		if !more {
			return // a journal grown too long is flushed by the next Apply or Wait
		}
	}
}

// releaseLoop gives up loopMu and wakes the callers of Wait that found it
// held.
func (s *Store) releaseLoop() {
	s.loopMu.Unlock()
	s.mu.Lock()
	close(s.loopFree)
	s.loopFree = make(chan struct{})
	s.mu.Unlock()
}

// iterate makes one barrier: the first of the commits staged now (their
// record and temporary files), and the second of the batch renamed by the
// last iteration (its directories). It returns false when there was
// nothing to do. The caller holds loopMu.
func (s *Store) iterate() bool {
	s.mu.Lock()
	err := s.writable("apply")
	if err == nil && s.jr == nil {
		err = fmt.Errorf("apply in %s: %w", s.dir, ErrClosed)
	}
	if err == nil {
		err = s.jr.broken
	}
	if err != nil {
		s.dropStaged(err)
		s.mu.Unlock()
		return false
	}
	unfinished, prev := s.unfinished != nil, s.renamed
	s.mu.Unlock()
	if unfinished {
		// No other change until the files of an earlier one are in place.
		if err := s.finishUnfinished(); err != nil {
			s.mu.Lock()
			s.dropStaged(err)
			s.mu.Unlock()
			return false
		}
	}
	s.gather()
	var next *batch
	if !s.pushesFirst(prev) {
		next, err = s.takeStaged()
		if err != nil {
			next = nil // dropped, with the error on each commit
		}
	}
	if next != nil {
		// A remote in sync mode gets the batch before it is durable
		// here: refused there, it is written nowhere (remote.go).
		if err = s.pushBatch(next); err != nil {
			s.fail(next, err)
			next = nil
		}
	}
	if next == nil && prev == nil {
		return err != nil // a dropped batch is progress: its waiters have their answer
	}

	// The barrier: the next batch's record and temporary files, and the
	// last batch's directories.
	var also []*os.File
	var dirs []*os.File
	if prev != nil {
		if err := failpoint.Hit("gitstore.before-barrier-2"); err != nil {
			s.unfinish(prev, err)
			prev = nil
		}
	}
	if prev != nil {
		for _, d := range slices.Concat(prev.temps.Dirs(), prev.dirs) {
			if slices.ContainsFunc(dirs, func(f *os.File) bool { return f.Name() == d }) {
				continue
			}
			f, err := os.Open(d)
			if err != nil {
				s.unfinish(prev, err)
				prev = nil
				break
			}
			dirs = append(dirs, f)
		}
	}
	defer func() {
		for _, f := range dirs {
			f.Close()
		}
	}()
	if prev != nil {
		also = append(also, dirs...)
	}
	var off int64
	if next != nil {
		s.jrMu.Lock()
		defer s.jrMu.Unlock()
		next.rec = next.record(s)
		frame, err := encodeRecord(next.rec)
		if err == nil {
			err = failpoint.Hit("gitstore.before-intent")
		}
		if err == nil {
			off, err = s.jr.append(frame)
			if err != nil {
				err = errors.Join(err, s.jr.undo(off))
			}
		}
		if err != nil {
			s.fail(next, err)
			next = nil
		} else {
			also = append(also, s.jr.file())
		}
	}
	var temps *atomicfile.Batch
	if next != nil {
		temps = next.temps
	} else {
		temps, _ = atomicfile.Prepare()
	}
	if prev == nil && next == nil {
		return true
	}
	err = temps.Sync(also...)
	if err != nil {
		if next != nil {
			if uerr := s.jr.undo(off); uerr != nil {
				err = errors.Join(err, uerr)
			}
			s.fail(next, err)
			next = nil
		}
		if prev != nil {
			s.unfinish(prev, err)
			prev = nil
		}
		return true
	}
	s.mu.Lock()
	if prev != nil {
		s.indexFiles(prev.files)
		s.markSwitched(prev.seq)
		s.renamed = nil
		s.kickMaintain()
	}
	if next != nil {
		// Durable: the commits will happen, here or at the next Open.
		s.setHead(next.commits[len(next.commits)-1].hash)
		s.records = append(s.records, &appliedRecord{rec: next.rec, added: addedOf(next.commits)})
		s.flushDue = len(s.records) >= maxJournalRecords
	}
	s.mu.Unlock()
	if prev != nil {
		prev.temps.Cleanup()
	}
	if next == nil {
		return true
	}

	// The renames and removals; their directories go in the next barrier.
	err = failpoint.Hit("gitstore.after-intent")
	if err == nil {
		err = next.temps.Rename()
	}
	for _, f := range next.files {
		if err == nil && f.remove {
			if rerr := os.Remove(filepath.Join(s.dir, filepath.FromSlash(f.path))); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
				err = rerr
			}
		}
	}
	if err != nil {
		s.unfinish(next, err)
		return true
	}
	// The batch is durable (its record) and its files are in place: its
	// callers are answered now. The next barrier makes the renames
	// durable, which only spares Open rolling the record forward.
	s.mu.Lock()
	s.renamed = next
	for _, c := range next.commits {
		c.resolve(stagedApplied, nil)
	}
	s.answered = len(next.commits)
	s.mu.Unlock()
	return true
}

// gatherFor is how long a barrier waits for the callers the last one
// answered to stage their next commits. A variable for the benchmarks.
var gatherFor = 200 * time.Microsecond

// gather waits, for at most gatherFor, until as many commits are staged
// as the last batch answered: under load the callers it answered come
// back with their next change within some tens of microseconds, and a
// barrier that takes them all serves more changes for the same wait on
// the disk. A lone caller never waits.
func (s *Store) gather() {
	s.mu.Lock()
	n := s.answered
	s.answered = 0
	s.mu.Unlock()
	if n < 2 {
		return
	}
	deadline := time.Now().Add(gatherFor)
	for {
		s.mu.Lock()
		enough := len(s.staged) >= n
		s.mu.Unlock()
		left := time.Until(deadline)
		if enough || left <= 0 {
			return
		}
		t := time.NewTimer(left)
		select {
		case <-s.stagedSignal:
		case <-t.C:
		}
		t.Stop()
	}
}

// takeStaged takes the commits staged as the next batch, builds its
// record and writes its temporary files. It returns nil when nothing is
// staged; on an error, the batch is dropped.
func (s *Store) takeStaged() (*batch, error) {
	s.mu.Lock()
	b := &batch{commits: s.staged}
	s.staged = nil
	for _, c := range b.commits {
		c.state = stagedTaken
	}
	if len(b.commits) == 0 {
		s.mu.Unlock()
		return nil, nil
	}
	s.seq++
	b.seq = s.seq
	s.mu.Unlock()
	b.files = finalFiles(b.commits)
	var writes []atomicfile.File
	for _, f := range b.files {
		abs := filepath.Join(s.dir, filepath.FromSlash(f.path))
		if f.remove {
			b.dirs = append(b.dirs, filepath.Dir(abs))
			continue
		}
		made, err := s.mkdirs(filepath.Dir(abs))
		if err != nil {
			s.fail(b, err)
			return nil, err
		}
		b.dirs = append(b.dirs, made...)
		// The temporary file goes beside its target, so that a directory
		// the server may not write fails the change here, before it is
		// durable, not at the rename. One a crash leaves is skipped by
		// Commit and Dirty, and removed by recovery.Run (or
		// atomicfile.CleanTemps).
		writes = append(writes, atomicfile.File{Path: abs, Data: f.data, Perm: f.perm})
	}
	var err error
	if b.temps, err = atomicfile.Prepare(writes...); err != nil {
		s.fail(b, err)
		return nil, err
	}
	return b, nil
}

// record returns the journal record of b.
func (b *batch) record(s *Store) *journalRecord {
	rec := &journalRecord{Seq: b.seq, Branch: s.branch}
	if base := b.commits[0].parent; !base.IsZero() {
		rec.Base = base.String()
	}
	for _, c := range b.commits {
		jc := journalCommit{Object: c.object, Forward: c.forward}
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
	return rec
}

// fail drops batch b, which is not durable, and every commit staged on
// top of it, with err as their result.
func (s *Store) fail(b *batch, err error) {
	if b.temps != nil {
		b.temps.Cleanup()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range b.commits {
		s.dropMem(c.added)
		c.resolve(stagedDropped, err)
	}
	s.dropStaged(err)
}

// unfinish records durable batch b, whose files could not all be put in
// place (or their renames made durable), as unfinished: its commits'
// result is an *UnfinishedError until an iteration, Flush or Open puts
// them in place.
func (s *Store) unfinish(b *batch, err error) {
	if b.temps != nil {
		b.temps.Cleanup()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.renamed == b {
		s.renamed = nil
	}
	last := b.commits[len(b.commits)-1].hash
	ue := &UnfinishedError{Commit: last.String(), Err: err}
	if s.unfinished == nil {
		s.unfinished = &unfinishedBatch{}
	}
	s.unfinished.commits = append(s.unfinished.commits, b.commits...)
	s.unfinished.seq = max(s.unfinished.seq, b.seq)
	s.unfinishedErr = err
	for _, c := range b.commits {
		if !c.resolved { // one answered at its renames keeps its answer: it is durable
			c.resolve(stagedDurable, ue)
		}
	}
}

// markSwitched notes that every record up to seq is in place. The caller
// holds s.mu.
func (s *Store) markSwitched(seq uint64) {
	if seq > s.switched {
		s.switched = seq
		close(s.switchedCh)
		s.switchedCh = make(chan struct{})
	}
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
// all in place, and the last record they came in.
type unfinishedBatch struct {
	commits []*Staged
	seq     uint64
}

// finishUnfinished puts the files of the unfinished batches in place, as
// Open would. The caller holds loopMu, or knows no batch is being
// renamed. Until it succeeds, their commits' result is an
// *UnfinishedError.
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
		s.unfinishedErr = err
		for _, c := range u.commits {
			c.resolve(stagedDurable, ue)
		}
		return ue
	}
	s.unfinished = nil
	s.indexFiles(files)
	s.markSwitched(u.seq)
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
