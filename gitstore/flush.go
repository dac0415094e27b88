package gitstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/index"
	"github.com/go-git/go-git/v5/storage/filesystem"

	"github.com/mcpkeep/mcpkeep/atomicfile"
	"github.com/mcpkeep/mcpkeep/internal/failpoint"
)

// When Maintain flushes: after a quiet spell of flushDelay since the last
// Apply, or at once when flushRecords records wait. Variables for the
// tests.
var (
	flushDelay   = 20 * time.Millisecond
	flushRecords = 128
	// maxFlushedMem is how many bytes of objects already flushed the
	// store keeps serving from memory before it opens a fresh view of
	// the pack directory, which serves them from their pack.
	maxFlushedMem = 8 << 20
)

// memObject is an object the store serves from memory: staged, in the
// journal, or flushed to a pack that the store's view of the pack
// directory does not hold yet.
type memObject struct {
	obj     plumbing.EncodedObject
	flushed bool
}

// addMem keeps obj in memory unless it is there already (or, with
// stored, in the repository), and reports whether it added it. Stage does
// not ask the repository, a lookup that was a tenth of a change's work:
// an object it holds already is then packed twice, which costs a few
// bytes and nothing else. The caller holds s.mu.
func (s *Store) addMem(h plumbing.Hash, obj plumbing.EncodedObject, stored bool) bool {
	if _, ok := s.mem[h]; ok {
		return false
	}
	if stored && s.storage.HasEncodedObject(h) == nil {
		return false
	}
	s.mem[h] = &memObject{obj: obj}
	return true
}

// dropMem forgets objects of commits that will never be written. The
// caller holds s.mu.
func (s *Store) dropMem(hashes []plumbing.Hash) {
	for _, h := range hashes {
		delete(s.mem, h)
	}
}

// setHead makes h what HEAD names to this process (the ref on disk follows
// at the next flush). The caller holds s.mu, or is Open.
func (s *Store) setHead(h plumbing.Hash) {
	s.headHash = h
	if s.headMoved != nil {
		select {
		case s.headMoved <- struct{}{}:
		default:
		}
	}
	name := plumbing.ReferenceName(s.branch)
	s.overlay[name] = plumbing.NewHashReference(name, h)
	if len(s.staged) == 0 {
		s.tip = h
		s.tipTree = plumbing.ZeroHash
		if !h.IsZero() {
			if c, err := s.repo.CommitObject(h); err == nil {
				s.tipTree = c.TreeHash
			}
		}
	}
}

// followDisk lets reads take the branch from the ref on disk again once
// the journal holds nothing it lacks: another tool may move it (git
// commit by hand), which Stage then builds on. The caller holds s.mu.
func (s *Store) followDisk() {
	if s.opts.ReadOnly || len(s.staged) > 0 || len(s.records) > 0 || s.retiring != nil || s.renamed != nil || s.unfinished != nil {
		return
	}
	delete(s.overlay, plumbing.ReferenceName(s.branch))
}

// kickMaintain tells a running Maintain that a record was appended.
func (s *Store) kickMaintain() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// Flush writes every commit of the journal to the repository, durably (a
// pack of their objects, then the branch ref), then the index and the
// stamp, and empties the journal. Maintain calls it off the change path;
// Close, Commit, Rollback and Tag call it first. It first puts in place
// the files of a batch Apply left unfinished; while it cannot, it flushes
// nothing.
func (s *Store) Flush() error {
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	return s.flush(true)
}

// flush is Flush, for a caller that holds flushMu; without withIndex it
// leaves the index as it is (a flush under load: an index of 10,000
// files is a megabyte, whose writing a change's fsync would wait for).
func (s *Store) flush(withIndex bool) error {
	s.jrMu.Lock()
	s.mu.Lock()
	if s.jr == nil {
		s.mu.Unlock()
		s.jrMu.Unlock()
		return nil
	}
	if s.retiring == nil && len(s.records) > 0 {
		s.retiring, s.records = s.records, nil
		s.jr.rotate()
	}
	recs := s.retiring
	var entries []*index.Entry
	head := s.headHash
	if len(recs) == 0 && withIndex && s.indexDirty {
		// Everything is flushed, by flushes that left the index behind.
		entries = s.indexEntries()
	}
	s.mu.Unlock()
	s.jrMu.Unlock()
	if entries != nil {
		return s.writeCaches(head, encodeIndex(entries))
	}
	if len(recs) == 0 {
		return nil
	}
	if err := s.writeRecords(recs, withIndex); err != nil {
		return err
	}
	// A record goes only once its files are in place: Open rolls them
	// forward from it until then.
	if err := s.waitSwitched(recs[len(recs)-1].rec.Seq); err != nil {
		return err
	}
	s.mu.Lock()
	s.retiring = nil
	err := s.jr.emptyInactive()
	s.followDisk()
	s.mu.Unlock()
	if err != nil {
		return err
	}
	return s.maybeRefresh()
}

// waitSwitched returns once every record up to seq is in place, applying
// (or finishing unfinished batches) itself when no one else is.
func (s *Store) waitSwitched(seq uint64) error {
	for {
		s.mu.Lock()
		done, ch, unfinished := s.switched >= seq, s.switchedCh, s.unfinished != nil
		s.mu.Unlock()
		if done {
			return nil
		}
		if s.loopMu.TryLock() {
			var err error
			if unfinished {
				err = s.finishUnfinished()
			}
			s.mu.Lock()
			pending := s.renamed != nil
			s.mu.Unlock()
			if err == nil && pending {
				s.iterate()
			}
			s.releaseLoop()
			if err != nil {
				return fmt.Errorf("gitstore: the journal keeps records whose files are not in place: %w", err)
			}
			continue
		}
		s.mu.Lock()
		free := s.loopFree
		s.mu.Unlock()
		select {
		case <-ch:
		case <-free:
		}
	}
}

// writeRecords writes the objects of recs as one pack, then the ref to
// their last commit, durably, then (withIndex) the index, and the stamp.
func (s *Store) writeRecords(recs []*appliedRecord, withIndex bool) error {
	s.mu.Lock()
	var objs []plumbing.EncodedObject
	for _, r := range recs {
		for _, h := range r.added {
			if m, ok := s.mem[h]; ok && !m.flushed {
				objs = append(objs, m.obj)
			}
		}
	}
	last := recs[len(recs)-1].rec
	head := plumbing.ComputeHash(plumbing.CommitObject, last.Commits[len(last.Commits)-1].Object)
	var entries []*index.Entry
	if withIndex {
		entries = s.indexEntries()
	}
	s.mu.Unlock()
	var idx []byte
	if withIndex {
		idx = encodeIndex(entries)
	}

	if err := s.writeMemPack(objs); err != nil {
		return err
	}
	if err := failpoint.Hit("gitstore.flush-after-pack"); err != nil {
		return err
	}
	if cur, err := os.ReadFile(filepath.Join(s.gitDir, filepath.FromSlash(s.branch))); err != nil || string(cur) != head.String()+"\n" {
		if err := s.writeRef(s.branch, head); err != nil {
			return err
		}
	}
	if err := failpoint.Hit("gitstore.flush-after-ref"); err != nil {
		return err
	}
	if err := s.writeCaches(head, idx); err != nil {
		return err
	}
	s.mu.Lock()
	for _, r := range recs {
		for _, h := range r.added {
			if m, ok := s.mem[h]; ok && !m.flushed {
				m.flushed = true
				s.memFlushed += int(m.obj.Size())
			}
		}
	}
	// A view that did not list the pack must not replace the store's
	// now: useStorage would forget these objects from memory.
	s.packGen++
	s.mu.Unlock()
	return nil
}

// indexSnapshot returns the index the store keeps, encoded. The caller
// holds s.mu.
func (s *Store) indexSnapshot() []byte { return encodeIndex(s.indexEntries()) }

// indexEntries returns the entries of the index the store keeps, for
// encodeIndex, which may run without the lock. The caller holds s.mu.
func (s *Store) indexEntries() []*index.Entry {
	out := make([]*index.Entry, 0, len(s.index))
	for _, e := range s.index {
		out = append(out, e)
	}
	s.indexDirty = false
	return out
}

// encodeIndex encodes entries as an index (version 2).
func encodeIndex(entries []*index.Entry) []byte {
	slices.SortFunc(entries, func(a, b *index.Entry) int { return strings.Compare(a.Name, b.Name) })
	var buf bytes.Buffer
	if err := index.NewEncoder(&buf).Encode(&index.Index{Version: 2, Entries: entries}); err != nil {
		return nil
	}
	return buf.Bytes()
}

// writeCaches writes the index (idx, when not nil) and then the stamp,
// atomically and without fsync (see Open). A stamp written without an
// index says "index -": the index on disk is not HEAD's.
func (s *Store) writeCaches(head plumbing.Hash, idx []byte) error {
	stamp := head.String() + "\n"
	var files []atomicfile.File
	if idx != nil {
		files = append(files, atomicfile.File{Path: filepath.Join(s.gitDir, "index"), Data: idx, Perm: 0o644, NoSync: true})
		stamp += "index " + indexChecksum(idx) + "\n"
	} else {
		stamp += "index -\n"
	}
	files = append(files, atomicfile.File{Path: filepath.Join(s.gitDir, stampFile), Data: []byte(stamp), Perm: 0o644, NoSync: true})
	return atomicfile.WriteFiles(files...)
}

// indexChecksum returns the SHA-1 trailer of an encoded index, in hex.
func indexChecksum(idx []byte) string {
	if len(idx) < 20 {
		return ""
	}
	return plumbing.Hash(idx[len(idx)-20:]).String()
}

// maybeRefresh opens a fresh view of the pack directory once the objects
// served from memory that are in a pack already pass maxFlushedMem: the
// new view is made and loads the packs' indexes with no lock held, and
// replaces the old one under the lock.
func (s *Store) maybeRefresh() error {
	s.mu.Lock()
	due := s.memFlushed > maxFlushedMem
	s.mu.Unlock()
	if !due {
		return nil
	}
	return s.freshView()
}

// viewListed, when set, runs in freshView once a new view has listed the
// packs, before it is used (for the tests).
var viewListed func()

// freshView makes a new view of the pack directory, which loads the
// packs' indexes with no lock held, and makes it the store's under s.mu.
// A view listed with no lock held can be stale by the time it is used: a
// flush may have written a pack it does not list and marked its objects
// flushed (useStorage would forget them from memory: "object not found"),
// packing may have replaced packs it lists (a read in one: "packfile not
// found"), or a fetch written one (refreshObjects). Each of those counts
// packGen under s.mu, and freshView lists again when packGen moved
// meanwhile; it leaves out the packs housekeepPacks is deleting. It does
// not take flushMu: a fetch calls it holding pushMu, which a sync-mode
// change takes while Commit, Rollback or Tag hold flushMu (see settle),
// so that order would deadlock. It lists again only when another step
// made progress.
func (s *Store) freshView() error { return s.switchView(nil) }

// switchView is freshView for a view that leaves out the packs deleting
// names as well, when not nil: those housekeepPacks is about to delete.
// Once that view is the store's, views listed later leave them out too
// (packsGone), and those listed before are stale (packGen counts).
func (s *Store) switchView(deleting map[string]bool) error {
	for {
		s.mu.Lock()
		gen, gone := s.packGen, deleting
		if gone == nil {
			gone = maps.Clone(s.packsGone)
		}
		s.mu.Unlock()
		st := newStorageWithout(s.gitDir, gone)
		if _, err := st.ObjectPacks(); err != nil {
			st.Close()
			return err
		}
		_ = st.HasEncodedObject(plumbing.ZeroHash) // loads every pack's index
		if viewListed != nil {
			viewListed()
		}
		s.mu.Lock()
		if s.packGen == gen {
			if deleting != nil {
				s.packsGone = deleting
				s.packGen++
			}
			err := s.useStorage(st)
			s.mu.Unlock()
			return err
		}
		s.mu.Unlock()
		st.Close()
	}
}

// useStorage makes st the store's view of the repository, forgets the
// objects in memory that are in a pack, and closes the old view. The
// caller holds s.mu.
func (s *Store) useStorage(st *filesystem.Storage) error {
	old := s.storage
	if err := s.openRepo(st); err != nil {
		return err
	}
	for h, m := range s.mem {
		if m.flushed {
			delete(s.mem, h)
		}
	}
	s.memFlushed = 0
	if old != nil {
		old.Close()
	}
	return nil
}

// Maintain runs the store's housekeeping until ctx is done, off the
// change path: it flushes the journal (Flush) after a quiet 20 ms since
// the last Apply, or when 128 records wait; and it packs loose objects and
// merges small packs when they pass PackThreshold (as Commit does when no
// Maintain runs): at the first Apply, after a quiet second, and at once
// when the flushes have left more than 32 packs; after a quiet second it
// also merges the smallest packs down to two when more than maxSmallPacks
// (4) are not frozen, so that a start reads few pack indexes. The pack
// is written with no lock held. A failed step is logged and tried again
// after the next Apply. Maintain returns nil when ctx is done, once the
// step in progress has finished. Run one Maintain per Store.
func (s *Store) Maintain(ctx context.Context) error {
	if s.opts.ReadOnly {
		return nil
	}
	s.maintained.Add(1)
	defer s.maintained.Add(-1)
	pack := func(tidy bool) {
		if err := s.housekeepPacks(tidy); err != nil {
			s.log.Warn("gitstore: packing failed; will retry", "repo", s.dir, "err", err)
		}
	}
	first := true
	idle := time.NewTimer(packIdle)
	idle.Stop()
	defer idle.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-idle.C:
			pack(true)
			continue
		case <-s.kick:
		}
		if first {
			// A repository left needing packing (loose objects from
			// Commit) is packed at the first change, beside it: not at
			// Open, whose count of loose objects would slow every start.
			first = false
			pack(false)
		}
		quiet, ok := s.quiet(ctx)
		if !ok {
			return nil
		}
		s.flushMu.Lock()
		err := s.flush(quiet) // the index, when changes have paused
		s.flushMu.Unlock()
		if err != nil {
			s.log.Warn("gitstore: flushing the journal failed; will retry", "repo", s.dir, "err", err)
			continue
		}
		// Packing is work for the processor that changes would wait for
		// on a small machine: it waits for a quiet spell, unless the
		// flushes have made so many packs that lookups would slow.
		if s.packCount() > maxPacks {
			pack(false)
		} else {
			idle.Reset(packIdle)
		}
	}
}

// packIdle is how long Maintain waits without a change before it packs;
// maxPacks how many packs it lets changes make before it packs at once.
// Variables for the tests.
var (
	packIdle = time.Second
	maxPacks = 32
)

// packCount returns how many packs the repository holds.
func (s *Store) packCount() int {
	entries, _ := os.ReadDir(filepath.Join(s.gitDir, "objects", "pack"))
	n := 0
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".pack") {
			n++
		}
	}
	return n
}

// quiet waits for flushDelay without an Apply (quiet), or until
// flushRecords records wait; ok is false when ctx is done first.
func (s *Store) quiet(ctx context.Context) (quiet, ok bool) {
	t := time.NewTimer(flushDelay)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return false, false
		case <-t.C:
			return true, true
		case <-s.kick:
			s.mu.Lock()
			n := len(s.records)
			s.mu.Unlock()
			if n >= flushRecords {
				return false, true
			}
			t.Reset(flushDelay)
		}
	}
}

// housekeepPacks packs the loose objects and merges the small packs when
// together they pass PackThreshold objects, as maybePack does, but with
// no lock held while it writes the pack. When changes have paused (tidy),
// it also merges the smallest packs down to tidyLeaves when more than
// maxSmallPacks are not frozen (tidyUp): the new pack and its index
// are written and synced before the packs it replaces are removed, so a
// crash leaves the objects in one or both.
func (s *Store) housekeepPacks(tidy bool) error {
	if s.opts.PackThreshold < 0 {
		return nil
	}
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	st := newStorage(s.gitDir)
	defer func() {
		if st != nil {
			st.Close()
		}
	}()
	var loose []plumbing.Hash
	if err := st.ForEachObjectHash(func(h plumbing.Hash) error { loose = append(loose, h); return nil }); err != nil {
		return err
	}
	packs, err := packsOf(s.gitDir, st)
	if err != nil {
		return err
	}
	// Due when the loose objects and the packs not frozen (see
	// packFactor) hold more than PackThreshold objects: the packs a flush
	// leaves are merged, however large the batches that made them.
	small, smallPacks := len(loose), 0
	for _, p := range packs {
		if p.objects < frozenPacks*s.opts.PackThreshold {
			small += p.objects
			smallPacks++
		}
	}
	tidy = tidy && smallPacks > maxSmallPacks
	if small <= s.opts.PackThreshold && !tidy {
		return nil
	}
	if err := failpoint.Hit("gitstore.before-pack"); err != nil {
		return err
	}
	var merged []pack
	if small > s.opts.PackThreshold {
		merged = rollup(packs, len(loose), s.opts.PackThreshold)
	}
	if tidy {
		merged = tidyUp(packs, merged, len(loose), s.opts.PackThreshold)
	}
	if len(loose) == 0 && len(merged) < 2 {
		return nil
	}
	written, err := writePack(st, s.dir, loose, merged)
	if err != nil {
		return err
	}
	if err := failpoint.Hit("gitstore.after-pack"); err != nil {
		return err
	}
	// The store moves to a view of the pack directory that does not list
	// the merged packs (a view that lists a deleted pack would look in
	// it), and only then are they deleted. Only the move holds the lock:
	// deleting 32 packs under it held every change for 7-26 ms, and
	// loading the new view's indexes for 1-3 ms more (on the shared
	// machine; BENCHMARKS.md, issue 20).
	// A fetch may write a pack meanwhile (refreshObjects): the view is
	// listed again when packGen moved. Views listed from now on leave
	// the merged packs out (packsGone), and those listed before are
	// stale (packGen).
	gone := map[string]bool{}
	for _, p := range merged {
		if p.hash != written {
			gone["pack-"+p.hash.String()+".pack"] = true
		}
	}
	err = s.switchView(gone)
	defer func() {
		s.mu.Lock()
		s.packsGone = nil
		s.mu.Unlock()
	}()
	if err != nil {
		return err
	}
	for _, p := range merged {
		if p.hash != written {
			if err := deletePack(s.gitDir, p.hash); err != nil {
				return err
			}
		}
	}
	for _, h := range loose {
		if err := st.DeleteLooseObject(h); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	s.log.Info("gitstore: packed loose objects", "repo", s.dir, "loose", len(loose), "packs_merged", len(merged),
		"packs", len(packs)-len(merged)+1)
	return nil
}

// deletePack removes pack h and its index, the pack first: an index alone
// is ignored by go-git and git, and removed by Open.
func deletePack(gitDir string, h plumbing.Hash) error {
	base := filepath.Join(gitDir, "objects", "pack", "pack-"+h.String())
	for _, ext := range []string{".pack", ".idx"} {
		if err := os.Remove(base + ext); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}
