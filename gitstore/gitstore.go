// Package gitstore versions a directory of configuration files in a git
// repository, and keeps that repository valid across crashes and power cuts.
//
// It is built on go-git, which alone is not crash-safe: it never fsyncs,
// and it rewrites branch refs and the index in place (truncate, then write),
// so a kill can leave an empty ref (HEAD lost) or a truncated index.
// gitstore writes what matters itself.
//
// Two ways change the repository. Stage and Apply are the change path: a
// commit is built in memory from its parent's tree and the paths it
// changes (no walk of the work tree), and Apply makes every staged commit
// durable in two ordered barriers: a record in the store's journal with
// the temporary files of the new contents, fsynced at once; then the
// renames, and the fsync of their directories. The repository's own files
// (a pack of the objects, the branch ref) follow off that path: Maintain,
// run beside the store, writes the journal to them (Flush), and so do
// Close, Commit, Rollback and Tag first. Commit records whatever the work
// tree holds (hand edits); it writes the new objects as loose objects in
// one durable batch (atomicfile.WriteFiles), then the branch ref in a
// second. The index and a stamp of the last commit are caches, written
// without fsync, that Open checks. DESIGN.md ("Issue 20: the change
// path") has every crash state and what Open does about it.
//
// Open takes the journal back (its commits' files put in place when a
// crash came between Apply's barriers, its commits written to the
// repository; the temporary files an interrupted Apply left beside the
// files of the work tree are for recovery.Run or atomicfile.CleanTemps to
// remove, and Commit and Dirty skip them) and repairs what older writers or other tools left: an
// empty or garbage ref (from the stamp), an unreadable or stale index
// (rebuilt from HEAD) and, when the caller holds the home lock, the
// temporary files of interrupted writes, stale *.lock files, the index of
// a pack a kill left without its pack, a .git/config that does not parse
// (rewritten, its bytes kept beside it), and the directories .git/objects,
// .git/refs and those in them that Init made, when other users may write
// in them (made 0700; Init made them 0777 before). Every directory gitstore
// makes in .git is 0700, as .git is. An Apply or Commit that
// returned survives kill -9 and a power cut. History is never rewritten:
// Rollback makes a new commit.
//
// The work tree and the history are trusted no further than their files:
// gitstore versions regular files only. Commit refuses a work tree that
// holds a symbolic link, a named pipe, a socket or a device, or a file
// larger than Options.MaxFileSize, and reads each file without following a
// link or waiting on a pipe; Restore, Rollback and ReadAt refuse an entry
// of the history that is a symbolic link or a submodule, too large, or
// named to lead out of the work tree or into a .git (see EntryError). A
// Store is for one writer process (the holder of the home lock); its
// methods may be called from several goroutines. The git CLI sees a
// change once it is flushed (Maintain flushes after 20 ms without one); a
// ReadOnly Store in another process reads the journal and sees it at once.
package gitstore

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/format/index"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/filesystem"

	"github.com/mcpkeep/mcpkeep/atomicfile"
)

// Errors callers branch on.
var (
	// ErrNotRepo: the directory has no repository. Init makes one.
	ErrNotRepo = errors.New("gitstore: not a repository")
	// ErrBadRevision is matched by every *RevisionError.
	ErrBadRevision = errors.New("gitstore: bad revision")
	// ErrReadOnly: a Store opened with Options.ReadOnly was asked to write.
	ErrReadOnly = errors.New("gitstore: opened read-only")
	// ErrClosed: a Store was asked to write after Close, or Close came
	// before a staged commit was applied. Nothing was written; open the
	// store again to write.
	ErrClosed = errors.New("gitstore: the store is closed")
)

// RevisionError reports a revision that does not name a commit.
type RevisionError struct {
	Rev string // the revision as the caller gave it
	Err error  // why it names no commit
}

// Error names the revision and says which revisions work.
func (e *RevisionError) Error() string {
	return fmt.Sprintf("gitstore: revision %q does not name a commit (use a hash from the history, HEAD~N or a tag): %v", e.Rev, e.Err)
}

// Unwrap returns ErrBadRevision and the cause.
func (e *RevisionError) Unwrap() []error { return []error{ErrBadRevision, e.Err} }

// Options configure a Store. nil means defaults.
type Options struct {
	AuthorName, AuthorEmail string // default "mcpkeep", "mcpkeep@localhost"
	// HoldsLock says the caller holds the home's writer lock, so no other
	// git writer can be running: Open may remove stale *.lock files and
	// the temporary files of interrupted writes, which without the lock
	// may be a live writer's.
	HoldsLock bool
	// ReadOnly opens without repairing or writing anything: what Open
	// would repair is listed in Repairs, prefixed "would be", and Commit,
	// Restore, Rollback and Tag return an error matching ErrReadOnly. For
	// tools that look beside a live server (mcpkeep status, doctor without
	// --fix). Stale *.lock files are listed only with HoldsLock.
	ReadOnly bool
	// PackThreshold is how many loose objects (and objects in packs a
	// flush left) Commit or Maintain allows before it packs them; 0 means
	// DefaultPackThreshold, a negative value never packs.
	// Packing also merges the smallest packs, writing at most six times
	// PackThreshold objects in all, so its cost does not grow with the
	// history.
	PackThreshold int
	// MaxFileSize is the largest work-tree file Commit records and Stage
	// stages, and the largest file of the history Restore, Rollback and
	// ReadAt return, in bytes: 0 means atomicfile.DefaultMaxSize, a
	// negative value no limit.
	MaxFileSize int64
	Logger      *slog.Logger // nil = discard
}

// DefaultPackThreshold is the loose-object count that triggers packing.
const DefaultPackThreshold = 2000

const (
	defaultBranch = "main"
	stampFile     = "mcpkeep-head" // inside .git: the last commit, written after the ref

	// dirPerm is the mode of every directory made inside .git, as .git
	// itself is: the repository is its one writer's alone.
	dirPerm = 0o700
)

// Store is one config directory and its repository.
type Store struct {
	// Locks, taken in this order: flushMu, loopMu, jrMu, mu. mu is held
	// by every exported method but Dir and Repairs, briefly: go-git's
	// storage is not safe for concurrent use, and a server reads history
	// for one client while it commits for another. loopMu is held by the
	// caller making barriers (Apply, Staged.Wait), jrMu while the journal
	// is appended to or rotated, when mu is not; flushMu by a flush or
	// packing, which take the others only for moments.
	mu, loopMu, jrMu, flushMu sync.Mutex
	loopFree                  chan struct{} // closed, and made anew, each time loopMu is given up
	committer                 bool          // the committer goroutine runs (under mu)
	commitWG                  sync.WaitGroup
	stagedSignal              chan struct{} // a commit was staged (for gather)
	answered                  int           // commits the last barrier answered (for gather; under mu)
	dir, gitDir               string
	opts                      Options
	log                       *slog.Logger
	repo                      *git.Repository
	storage                   *filesystem.Storage
	branch                    string // refs/heads/…
	repairs                   []string
	loose                     int // loose objects: -1 until the first Commit counts them, then added to by each
	// overlay holds the refs the store knows better than the disk: the
	// branch, as the journal moves it, and those a ReadOnly Open
	// repaired in memory only; overlayConfig the config, when it repaired
	// that.
	overlay       map[plumbing.ReferenceName]*plumbing.Reference
	overlayConfig *config.Config

	// The change path (stage.go, apply.go, flush.go). headHash is what
	// HEAD names to this process; tip is the last staged commit.
	headHash, tip, tipTree plumbing.Hash
	staged                 []*Staged
	jr                     *journal         // nil when ReadOnly, and after Close
	closed                 atomic.Bool      // Close has run: writes are refused (ErrClosed)
	seq                    uint64           // of the last journal record
	records                []*appliedRecord // in the journal, not flushed
	retiring               []*appliedRecord // being flushed, in the inactive journal file
	unfinished             *unfinishedBatch
	unfinishedErr          error         // why it is
	renamed                *batch        // renamed, its directories not yet fsynced: the next barrier's
	switched               uint64        // the seq of the last record whose files are in place
	switchedCh             chan struct{} // closed, and made anew, when switched grows
	flushDue               bool          // the journal has grown past what a store flushes by itself
	mem                    map[plumbing.Hash]*memObject
	memFlushed             int // bytes of mem that are in a pack already
	// packGen counts the changes to the packs that a view of them
	// listed with no lock held may have missed (see freshView), and
	// packsGone names the packs housekeepPacks is deleting, which a
	// view must not list.
	packGen    uint64
	packsGone  map[string]bool
	trees      map[plumbing.Hash][]object.TreeEntry
	index      map[string]*index.Entry // the index, kept for the flush (writers only)
	indexDirty bool
	kick       chan struct{}
	maintained atomic.Int32 // running Maintain calls: Commit leaves packing to them

	// remote is the Remote attached to the store (remote.go), nil when
	// none; headMoved is its pusher's signal that HEAD moved.
	remote    *Remote
	headMoved chan struct{}
}

func options(o *Options) Options {
	var out Options
	if o != nil {
		out = *o
	}
	if out.AuthorName == "" {
		out.AuthorName = "mcpkeep"
	}
	if out.AuthorEmail == "" {
		out.AuthorEmail = "mcpkeep@localhost"
	}
	if out.PackThreshold == 0 {
		out.PackThreshold = DefaultPackThreshold
	}
	if out.Logger == nil {
		out.Logger = slog.New(slog.DiscardHandler)
	}
	return out
}

// Init makes dir (0700) a repository if it is not one yet, then opens it.
// It does not commit. A .git left half-made by a crash during Init is
// finished.
func Init(dir string, opts *Options) (*Store, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if err := atomicfile.MkdirAll(abs, 0o700); err != nil {
		return nil, err
	}
	gitDir := filepath.Join(abs, ".git")
	if _, err := os.Stat(filepath.Join(gitDir, "config")); errors.Is(err, fs.ErrNotExist) {
		if err := atomicfile.MkdirAll(gitDir, dirPerm); err != nil {
			return nil, err
		}
		st := newStorage(gitDir)
		// With go-git's default branch (master), a kill before the HEAD
		// write below left a repository committing to master.
		_, err := git.InitWithOptions(st, nil, git.InitOptions{DefaultBranch: plumbing.NewBranchReferenceName(defaultBranch)})
		st.Close()
		if err != nil && !errors.Is(err, git.ErrRepositoryAlreadyExists) {
			return nil, fmt.Errorf("gitstore: init %s: %w", abs, err)
		}
		// HEAD names our branch; written atomically like every ref.
		if err := atomicfile.WriteFile(filepath.Join(gitDir, "HEAD"), []byte("ref: refs/heads/"+defaultBranch+"\n"), 0o644); err != nil {
			return nil, err
		}
		// go-git writes HEAD before the config: after a crash between the
		// two it refuses to init again (HEAD exists), and without a config
		// Open finds no repository. Write the config it would have.
		if err := writeConfig(gitDir); err != nil {
			return nil, fmt.Errorf("gitstore: init %s: %w", abs, err)
		}
	}
	return Open(abs, opts)
}

// writeConfig writes the config go-git's Init writes, unless there is one.
func writeConfig(gitDir string) error {
	path := filepath.Join(gitDir, "config")
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	b, err := defaultConfig().Marshal()
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(path, b, 0o644)
}

// defaultConfig is the config Init writes: a bare repository, to go-git
// (gitstore keeps the work tree itself). It is all gitstore needs.
func defaultConfig() *config.Config {
	cfg := config.NewConfig()
	cfg.Core.IsBare = true
	return cfg
}

// newStorage opens go-git's storage of gitDir through the syncing
// filesystem. It does not set ExclusiveAccess: with it, go-git forgets its
// list of loose objects whenever it writes one and lists every loose object
// again at the next lookup, so each Commit read the whole objects directory
// several times over (a Commit took 5 times as long at 1,000 commits of
// history, most of it in lstat); without it a lookup opens one file. It is
// also the right setting for a ReadOnly store, whose repository a live
// writer changes under it.
func newStorage(gitDir string) *filesystem.Storage {
	return filesystem.NewStorageWithOptions(syncFS{osfs.New(gitDir)}, cache.NewObjectLRUDefault(),
		filesystem.Options{})
}

// newStorageWithout is newStorage for a view that does not see the packs
// named in gone (base names of .pack files), which are being deleted.
func newStorageWithout(gitDir string, gone map[string]bool) *filesystem.Storage {
	return filesystem.NewStorageWithOptions(withoutPacks{syncFS{osfs.New(gitDir)}, gone}, cache.NewObjectLRUDefault(),
		filesystem.Options{})
}

// Open opens the repository in dir and repairs it (see the package
// documentation); Repairs lists what it did. It returns an error matching
// ErrNotRepo when dir has no repository.
func Open(dir string, opts *Options) (*Store, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	o := options(opts)
	s := &Store{dir: abs, gitDir: filepath.Join(abs, ".git"), opts: o, log: o.Logger,
		overlay: map[plumbing.ReferenceName]*plumbing.Reference{},
		mem:     map[plumbing.Hash]*memObject{}, trees: map[plumbing.Hash][]object.TreeEntry{},
		kick: make(chan struct{}, 1), loopFree: make(chan struct{}), stagedSignal: make(chan struct{}, 1), switchedCh: make(chan struct{})}
	if _, err := os.Stat(filepath.Join(s.gitDir, "config")); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s: %w (run the server once to install the home)", abs, ErrNotRepo)
		}
		return nil, err
	}
	found, err := s.scanGit()
	if err != nil {
		return nil, err
	}
	if o.HoldsLock || o.ReadOnly {
		if err := s.cleanTemps(found.temps); err != nil {
			return nil, err
		}
		s.privateDirs()
	}
	if o.HoldsLock {
		if err := s.cleanLocks(found.locks); err != nil {
			return nil, err
		}
		if err := s.cleanPackIndexes(found.idxs); err != nil {
			return nil, err
		}
	}
	if err := s.repairConfig(); err != nil {
		return nil, err
	}
	if err := s.repairHEAD(); err != nil {
		return nil, err
	}
	if err := s.openRepo(newStorage(s.gitDir)); err != nil {
		return nil, err
	}
	if err := s.repairRef(); err != nil {
		s.storage.Close()
		return nil, err
	}
	if err := s.openChangePath(); err != nil {
		s.storage.Close()
		return nil, err
	}
	s.loose = -1 // counted at the first Commit (maybePack)
	for _, r := range s.repairs {
		s.log.Warn("gitstore: repaired", "repo", abs, "what", r)
	}
	return s, nil
}

// openChangePath takes the journal back (replay), flushes it to the
// repository and opens it for Apply, and loads the index; a ReadOnly
// store only takes the journal into memory.
func (s *Store) openChangePath() error {
	if s.opts.ReadOnly {
		return s.openReadOnly()
	}
	h, err := s.head()
	if err != nil {
		return err
	}
	s.setHead(h)
	recs, err := s.replay()
	if err != nil {
		return err
	}
	if err := s.loadIndex(); err != nil {
		return err
	}
	if len(recs) > 0 {
		s.retiring = recs
		if err := s.writeRecords(recs, true); err != nil {
			return fmt.Errorf("gitstore: write the journal's commits to the repository in %s: %w", s.dir, err)
		}
		s.retiring = nil
	} else if s.indexDirty {
		if err := s.writeCaches(s.headHash, s.indexSnapshot()); err != nil {
			return err
		}
	}
	s.jr, err = openJournal(s.gitDir)
	s.followDisk()
	return err
}

// openReadOnly takes the journal into memory on top of the branch. The
// writer, in another process, may flush while it reads: move the ref past
// the records it read, or empty the journal file it had not read yet. So
// it reads the ref on disk before and after, and reads again (up to ten
// times) until the ref held still: then it saw the journal of that ref,
// and so every commit Apply had returned before Open began.
func (s *Store) openReadOnly() error {
	name := plumbing.ReferenceName(s.branch)
	_, repaired := s.overlay[name] // repairRef named the branch: the disk's ref is not one
	repairs := len(s.repairs)
	for try := 1; ; try++ {
		before, berr := s.storage.Reference(name)
		h, err := s.head()
		if err != nil {
			return err
		}
		s.setHead(h)
		if _, err := s.replay(); err != nil {
			return err
		}
		after, aerr := s.storage.Reference(name)
		if repaired || berr != nil || aerr != nil || before.Hash() == after.Hash() || try == 10 {
			break
		}
		delete(s.overlay, name)
		s.repairs = s.repairs[:repairs]
		s.storage.Reindex()
	}
	return s.checkIndex()
}

// openRepo makes st the store's storage and opens the repository on it,
// through the overlay. The caller holds s.mu, or is Open.
func (s *Store) openRepo(st *filesystem.Storage) error {
	repo, err := git.Open(overlay{st, s}, nil)
	if err != nil {
		return fmt.Errorf("gitstore: open %s: %w", s.dir, err)
	}
	s.storage, s.repo = st, repo
	return nil
}

// reopen opens a fresh view of the repository (after a pack was written
// or deleted). The caller holds s.mu.
func (s *Store) reopen() error {
	s.packGen++ // a view listed meanwhile with no lock held may name the deleted packs
	return s.useStorage(newStorage(s.gitDir))
}

// Dir returns the work tree's absolute path.
func (s *Store) Dir() string { return s.dir }

// Repairs lists what Open repaired.
func (s *Store) Repairs() []string { return s.repairs }

// Close flushes the journal to the repository (see Flush), drops any
// commit staged and not applied, and releases the store. When the flush
// fails the journal stays, and the next Open writes it. It is safe to
// call more than once. Once it has returned, every method that writes
// returns an error matching ErrClosed and writes nothing; reads go on.
func (s *Store) Close() error {
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	defer s.closed.Store(true)
	var err error
	if s.jr != nil {
		// Put the files of a batch renamed last in place, then flush.
		s.loopMu.Lock()
		s.runLoop(func() bool { return s.renamed == nil && s.unfinished == nil })
		err = s.flush(true)
		s.loopMu.Lock()
		s.jrMu.Lock()
		s.mu.Lock()
		s.dropStaged(fmt.Errorf("gitstore: %s was closed before the commit was applied: %w", s.dir, ErrClosed))
		err = errors.Join(err, s.jr.close())
		s.jr = nil
		s.mu.Unlock()
		s.jrMu.Unlock()
		s.releaseLoop()
		s.commitWG.Wait()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.storage != nil {
		err = errors.Join(err, s.storage.Close())
	}
	return err
}

func (s *Store) repaired(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if s.opts.ReadOnly {
		msg = "would be " + msg
	}
	s.repairs = append(s.repairs, msg)
}

// writable returns an error matching ErrReadOnly for a read-only store,
// and one matching ErrClosed for a closed one; op names the refused
// operation.
func (s *Store) writable(op string) error {
	if s.opts.ReadOnly {
		return fmt.Errorf("%s in %s: %w (open it without Options.ReadOnly, holding the home lock)", op, s.dir, ErrReadOnly)
	}
	if s.closed.Load() {
		return fmt.Errorf("%s in %s: %w (open it again to write)", op, s.dir, ErrClosed)
	}
	return nil
}

// write runs fn unless the store is read-only: Open's repairs.
func (s *Store) write(fn func() error) error {
	if s.opts.ReadOnly {
		return nil
	}
	return fn()
}

// IsTemp reports whether name, the base name of a file inside a .git
// directory, is the temporary file of a write a crash interrupted: go-git's
// tmp_obj_, tmp_pack_ and tmp_idx_ files, or an atomicfile temporary (of a
// ref, the stamp or the index). Open removes those of its repository.
func IsTemp(name string) bool {
	return strings.HasPrefix(name, "tmp_obj_") || strings.HasPrefix(name, "tmp_pack_") ||
		strings.HasPrefix(name, "tmp_idx_") || atomicfile.IsTemp(name)
}

// gitFiles is what one walk of .git finds for Open.
type gitFiles struct {
	temps []string // temporary files of interrupted writes (IsTemp)
	locks []string // *.lock files outside objects/
	idxs  []string // pack indexes (objects/pack/pack-*.idx)
}

// scanGit walks .git once, but for the fan-out directories of loose
// objects: no temporary file is made in those (gitstore makes its loose
// objects' in objects/, go-git its packs' in objects/pack), and listing up
// to 256 of them was most of the cost of opening a repository with some
// history, which a server's start does twice (recovery, then the harness).
func (s *Store) scanGit() (gitFiles, error) {
	var found gitFiles
	objects := filepath.Join(s.gitDir, "objects")
	packs := filepath.Join(objects, "pack")
	err := filepath.WalkDir(s.gitDir, func(p string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil // removed under the walk
		}
		if err != nil {
			return err
		}
		if d.IsDir() {
			if filepath.Dir(p) == objects && IsFanOut(d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		switch name := d.Name(); {
		case IsTemp(name):
			found.temps = append(found.temps, p)
		case strings.HasSuffix(name, ".lock") && !strings.HasPrefix(p, objects+string(filepath.Separator)):
			found.locks = append(found.locks, p)
		case strings.HasPrefix(name, "pack-") && strings.HasSuffix(name, ".idx") && filepath.Dir(p) == packs:
			found.idxs = append(found.idxs, p)
		}
		return nil
	})
	return found, err
}

// IsFanOut reports whether name, an entry of a repository's objects
// directory, is that of a fan-out directory of loose objects: two
// lower-case hex digits. Nothing but loose objects goes in those, so a
// walk looking for temporary files can skip them.
func IsFanOut(name string) bool {
	return len(name) == 2 && strings.Trim(name, "0123456789abcdef") == ""
}

// cleanTemps removes the temporary files of interrupted writes. Only the
// holder of the home lock may: another process's may be a live write.
func (s *Store) cleanTemps(temps []string) error {
	for _, p := range temps {
		if err := s.write(func() error { return os.Remove(p) }); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		s.repaired("removed %s, the temporary file of a write a crash interrupted", s.rel(p))
	}
	return nil
}

// initDirs are the directories go-git's Init makes inside .git.
var initDirs = []string{"objects", "objects/info", "objects/pack", "refs", "refs/heads", "refs/tags"}

// privateDirs makes those of initDirs that other users may write in 0700,
// as Init makes them now: until syncFS.MkdirAll gave them dirPerm, Init
// made them 0777. It checks no other directory: it runs at every Open and
// costs a stat each, and gitstore made no other directory writable. A
// chmod that fails (a directory of another user's) is logged, not
// returned: the repository is as usable as it was, and .git, 0700, kept
// other users out.
func (s *Store) privateDirs() {
	var made []string
	for _, d := range initDirs {
		p := filepath.Join(s.gitDir, filepath.FromSlash(d))
		fi, err := os.Lstat(p)
		if err != nil || !fi.IsDir() || fi.Mode().Perm()&0o022 == 0 {
			continue // missing ones are made when needed, 0700
		}
		if err := s.write(func() error { return chmodDir(p, dirPerm) }); err != nil {
			s.log.Warn("gitstore: other users may write in a directory of the repository", "dir", p, "mode", fi.Mode().Perm(), "err", err)
			continue
		}
		made = append(made, s.rel(p))
	}
	if len(made) > 0 {
		s.repaired("restored mode 0700 of %s, which other users could write in", strings.Join(made, ", "))
	}
}

// chmodDir sets the mode of the directory at p, not following a link put
// there since it was looked at.
func chmodDir(p string, mode fs.FileMode) error {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Chmod(mode)
}

// cleanLocks removes *.lock files: with the home lock held, no git writer
// runs, so they are stale.
func (s *Store) cleanLocks(locks []string) error {
	for _, p := range locks {
		if err := s.write(func() error { return os.Remove(p) }); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		s.repaired("removed stale %s", s.rel(p))
	}
	return nil
}

// cleanPackIndexes removes each of idxs, the pack indexes scanGit found,
// whose pack is not there: go-git writes a pack's index before it renames
// the pack into place, and a merge deletes a pack before its index, so a
// kill in between leaves one. git and go-git ignore it (git warns). With
// the home lock held no pack is being written.
func (s *Store) cleanPackIndexes(idxs []string) error {
	for _, p := range idxs {
		if _, err := os.Lstat(strings.TrimSuffix(p, ".idx") + ".pack"); !errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err := s.write(func() error { return os.Remove(p) }); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		s.repaired("removed %s, the index of a pack a crash interrupted writing or deleting", s.rel(p))
	}
	return nil
}

func (s *Store) rel(p string) string {
	if r, err := filepath.Rel(s.dir, p); err == nil {
		return filepath.ToSlash(r)
	}
	return p
}

// repairConfig replaces a .git/config that does not parse (a hand edit, a
// bad disk) with the one Init writes, which is all gitstore needs, after
// copying its bytes beside it as config.corrupt-<time>: go-git cannot open
// the repository without it. Only the holder of the home lock rewrites it,
// as another git writer may be changing it; any other writer gets an error
// that names the file and says what to do.
func (s *Store) repairConfig() error {
	path := filepath.Join(s.gitDir, "config")
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("gitstore: %w", err)
	}
	_, perr := config.ReadConfig(bytes.NewReader(b))
	if perr == nil {
		return nil
	}
	if !s.opts.HoldsLock && !s.opts.ReadOnly {
		return fmt.Errorf("gitstore: %s does not parse (%v): open the repository holding the home lock "+
			"(start the server, or run mcpkeep doctor --fix) to set it aside and rewrite it, or restore it from a backup", path, perr)
	}
	cfg := defaultConfig()
	data, err := cfg.Marshal()
	if err != nil {
		return err
	}
	saved := path + ".corrupt-" + time.Now().UTC().Format("20060102T150405.000000000Z")
	s.overlayConfig = cfg
	err = s.write(func() error {
		// Copied, not moved: a crash between the two writes leaves the bad
		// config and a copy, never a repository without a config. CopyNew
		// never replaces an earlier copy, even one of the same instant.
		var err error
		if saved, err = atomicfile.CopyNew(saved, b, 0o644); err != nil {
			return err
		}
		return atomicfile.WriteFile(path, data, 0o644)
	})
	if err != nil {
		return fmt.Errorf("gitstore: rewrite %s, which does not parse: %w", path, err)
	}
	s.repaired("rewrote .git/config, which did not parse (%v); its bytes are in %s", perr, s.rel(saved))
	return nil
}

// repairHEAD makes .git/HEAD a symbolic ref to a branch and remembers it.
func (s *Store) repairHEAD() error {
	path := filepath.Join(s.gitDir, "HEAD")
	b, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	target, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "ref: ")
	if ok && strings.HasPrefix(target, "refs/heads/") && !strings.ContainsAny(target, " \x00") {
		s.branch = target
		return nil
	}
	s.branch = "refs/heads/" + defaultBranch
	s.overlay[plumbing.HEAD] = plumbing.NewSymbolicReference(plumbing.HEAD, plumbing.ReferenceName(s.branch))
	if err := s.write(func() error { return atomicfile.WriteFile(path, []byte("ref: "+s.branch+"\n"), 0o644) }); err != nil {
		return err
	}
	if errors.Is(err, fs.ErrNotExist) {
		s.repaired("wrote the missing .git/HEAD")
	} else {
		s.repaired("rewrote .git/HEAD (was %q)", truncate(string(b)))
	}
	return nil
}

func truncate(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// readHash reads a file holding one commit hash and returns it if it names
// a commit in the repository.
func (s *Store) readHash(path string) (plumbing.Hash, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return plumbing.ZeroHash, false
	}
	first, _, _ := bytes.Cut(b, []byte("\n")) // the stamp has a second line
	str := string(bytes.TrimSpace(first))
	if len(str) != 40 || !plumbing.IsHash(str) {
		return plumbing.ZeroHash, false
	}
	h := plumbing.NewHash(str)
	if _, err := s.repo.CommitObject(h); err != nil {
		return plumbing.ZeroHash, false
	}
	return h, true
}

// repairRef makes the branch ref name a valid commit: from the stamp when
// the ref is empty, garbage or dangling.
func (s *Store) repairRef() error {
	refPath := filepath.Join(s.gitDir, filepath.FromSlash(s.branch))
	stampPath := filepath.Join(s.gitDir, stampFile)
	if _, err := os.Stat(refPath); errors.Is(err, fs.ErrNotExist) {
		// No loose ref: a fresh repository, or one whose refs were packed
		// by git gc.
		if ref, err := s.repo.Reference(plumbing.ReferenceName(s.branch), false); err == nil && !ref.Hash().IsZero() {
			return nil
		}
		if h, ok := s.readHash(stampPath); ok {
			s.repaired("restored missing %s from the stamp (%s)", s.branch, h)
			return s.repairRefTo(h)
		}
		return nil
	}
	if _, ok := s.readHash(refPath); ok {
		return nil
	}
	b, _ := os.ReadFile(refPath)
	h, ok := s.readHash(stampPath)
	if !ok {
		return fmt.Errorf("gitstore: %s holds %q, not a commit, and there is no stamp to repair it from; restore the config directory from a backup",
			refPath, truncate(string(b)))
	}
	s.repaired("rewrote %s (was %q) from the stamp (%s)", s.branch, truncate(string(b)), h)
	return s.repairRefTo(h)
}

// repairRefTo points the branch at h: on disk, or only in the overlay of a
// read-only store.
func (s *Store) repairRefTo(h plumbing.Hash) error {
	name := plumbing.ReferenceName(s.branch)
	s.overlay[name] = plumbing.NewHashReference(name, h)
	return s.write(func() error { return s.writeRef(s.branch, h) })
}

// writeRef writes a loose ref atomically and durably, and then the files
// of after in the same atomicfile.WriteFiles.
func (s *Store) writeRef(name string, h plumbing.Hash, after ...atomicfile.File) error {
	path := filepath.Join(s.gitDir, filepath.FromSlash(name))
	if err := atomicfile.MkdirAll(filepath.Dir(path), dirPerm); err != nil {
		return err
	}
	ref := atomicfile.File{Path: path, Data: []byte(h.String() + "\n"), Perm: 0o644}
	return atomicfile.WriteFiles(append([]atomicfile.File{ref}, after...)...)
}

// head returns the commit the branch names, or ZeroHash for an empty
// repository.
func (s *Store) head() (plumbing.Hash, error) {
	ref, err := s.repo.Reference(plumbing.ReferenceName(s.branch), false)
	if errors.Is(err, plumbing.ErrReferenceNotFound) {
		return plumbing.ZeroHash, nil
	}
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("gitstore: read %s in %s: %w", s.branch, s.dir, err)
	}
	return ref.Hash(), nil
}

// Resolve returns the full hash of the commit rev names (a full or short
// hash, HEAD, HEAD~N, a branch or a tag), or a *RevisionError. A caller
// that acts on rev in more than one call resolves it once, so that a
// commit in between does not move HEAD~N under it.
func (s *Store) Resolve(rev string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, err := s.resolve(rev)
	if err != nil {
		return "", err
	}
	return c.Hash.String(), nil
}

// Head returns the hash of the last commit, or "" for an empty repository.
func (s *Store) Head() (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, err := s.head()
	if err != nil || h.IsZero() {
		return "", err
	}
	return h.String(), nil
}

func (s *Store) headCommit() (*object.Commit, error) {
	h, err := s.head()
	if err != nil || h.IsZero() {
		return nil, err
	}
	return s.repo.CommitObject(h)
}
