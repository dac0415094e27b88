package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpkeep/mcpkeep/bootstrap"
	"github.com/mcpkeep/mcpkeep/gitstore"
	"github.com/mcpkeep/mcpkeep/recovery"
	"github.com/mcpkeep/mcpkeep/statefile"
)

// Env is what a server built on the Harness gets: the home, its versioned
// config store, a logger, what start-up found, and Update, the one way to
// change config durably.
//
// An Env can also be made outside a Harness, as a struct literal with Home,
// ConfigDir, Store and Logger, for a program that takes the home's lock
// itself or, like a benchmark's reference server, none: Update, Commit,
// Rollback and Files work the same, and State has only Home.
type Env struct {
	Home      string           // absolute home directory
	ConfigDir string           // <home>/config, a git repository
	Store     *gitstore.Store  // the config repository; write through Update
	Logger    *slog.Logger     // never nil
	Boot      bootstrap.Result // what bootstrap found and did: installed, resumed, upgraded, boots
	Report    recovery.Report  // what start-up recovery found and did
	// MaxFileSize is the largest config file Reader reads (0 means
	// atomicfile.DefaultMaxSize): Options.MaxFileSize.
	MaxFileSize int64

	mu sync.Mutex // one update at a time: the home has one writer
	// unclosed closes the checkpoint of a failed Update that could not be
	// closed (its rollback or its Done failed); see settle.
	unclosed func() error
	state    func() statefile.State         // nil outside a Harness
	route    func(*mcp.ServerSession) Route // nil outside a Harness
}

// Update makes one durable, all-or-nothing change to config files. It
// begins a checkpoint holding the pre-images of paths (relative to
// ConfigDir), runs write, commits every change in the config repository with
// message msg, and ends the checkpoint. It returns the new commit hash, or ""
// when write changed nothing. If write or the commit fails, the files are
// put back as they were and the error is returned; if the process dies
// instead, the next start's recovery puts them back. If even putting them
// back fails (a disk error), every later Update and Commit first retries
// it, and fails until it succeeds: the open checkpoint would otherwise roll
// back their changes at the next start. Updates are serialized. write
// should replace files with atomicfile.
func (e *Env) Update(ctx context.Context, msg string, paths []string, write func() error) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.update(msg, paths, write)
}

// update is Update, for a caller that holds e.mu.
func (e *Env) update(msg string, paths []string, write func() error) (string, error) {
	abs := make([]string, len(paths))
	for i, p := range paths {
		if filepath.IsAbs(p) {
			return "", fmt.Errorf("lifecycle: update path %q must be relative to %s", p, e.ConfigDir)
		}
		abs[i] = filepath.Join(e.ConfigDir, filepath.FromSlash(p))
	}
	if err := e.settle(); err != nil {
		return "", e.failed(msg, abs, "unchanged", err)
	}
	cp, err := recovery.Begin(e.Home, msg, abs...)
	if err != nil {
		return "", e.failed(msg, abs, "unchanged", err)
	}
	hash, err := e.writeAndCommit(msg, write)
	if err != nil {
		if rerr := cp.Rollback(); rerr != nil {
			e.unclosed = cp.Rollback
			return "", e.failed(msg, abs, "not yet put back (the next update, or the next start, puts it back)",
				errors.Join(err, fmt.Errorf("roll back %q: %w", msg, rerr)))
		}
		return "", e.failed(msg, abs, "unchanged", err)
	}
	if err := cp.Done(); err != nil {
		// The commit is durable; a leftover checkpoint would roll it back
		// at the next start, so report the failure loudly, and close it
		// before any other change.
		e.unclosed = cp.Done
		return hash, withRemedy(fmt.Errorf("lifecycle: %q committed as %s but its checkpoint could not be closed: %w", msg, hash, err), e.Home)
	}
	return hash, nil
}

// failed describes an update that did not happen: what it was, the files
// it touched and what became of them, and, for a disk or permission error,
// what to do about it.
func (e *Env) failed(msg string, files []string, fate string, err error) error {
	if r := remedy(err, e.Home); r != "" {
		return &explained{prefix: fmt.Sprintf("%s failed, %s %s; %s", msg, strings.Join(files, ", "), fate, r), err: err}
	}
	return err
}

// settle closes the checkpoint a failed Update left open, retrying the
// rollback or the Done that failed. Until it is closed no other change may
// be made: the next start rolls back every open checkpoint, and would take
// the later changes with it.
func (e *Env) settle() error {
	if e.unclosed == nil {
		return nil
	}
	if err := e.unclosed(); err != nil {
		return fmt.Errorf("lifecycle: a failed earlier update left its checkpoint open and it still cannot be closed, so no other change is made until it is: %w", err)
	}
	e.unclosed = nil
	return nil
}

func (e *Env) writeAndCommit(msg string, write func() error) (string, error) {
	if err := write(); err != nil {
		return "", err
	}
	return e.Store.Commit(msg)
}

// Commit commits every uncommitted change in the config repository, such as
// edits made by hand while the server runs, and returns the new hash or ""
// when there was nothing to commit. It waits for any Update in progress.
func (e *Env) Commit(msg string) (string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.settle(); err != nil {
		return "", withRemedy(err, e.Home)
	}
	return e.Store.Commit(msg)
}

// State returns a copy of the server's current state record without its
// bearer token, for tools such as server_info.
func (e *Env) State() statefile.State {
	if e.state == nil {
		return statefile.State{Home: e.Home}
	}
	s := e.state()
	s.Token = ""
	return s
}

// Rollback makes the config equal to revision rev as a new commit (history
// is never rewritten) and returns its hash, or "" when the tree already
// equals rev. Like Update it is all-or-nothing across a crash: the files of
// the work tree and of rev are checkpointed first, so that a file rev
// brings back is removed again if the rollback does not finish.
//
// The files are listed, and rev resolved to a commit, under the same lock
// as the rollback itself: a relative rev (HEAD~1) must name the same commit
// for the checkpoint as for the rollback, whatever else the server does.
func (e *Env) Rollback(ctx context.Context, rev string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	target, err := e.Store.Resolve(rev)
	if err != nil {
		return "", err
	}
	files, err := configFiles(e.ConfigDir)
	if err != nil {
		return "", err
	}
	atRev, err := e.Store.FilesAt(target)
	if err != nil {
		return "", err
	}
	for _, f := range atRev {
		if !slices.Contains(files, f) {
			files = append(files, f)
		}
	}
	msg := "rollback to " + rev
	var hash string
	_, err = e.update(msg, files, func() error {
		var err error
		hash, err = e.Store.Rollback(target, msg)
		return err
	})
	return hash, err
}

// configFiles lists the regular files of the config work tree, relative to
// dir and slash-separated, without .git.
func configFiles(dir string) ([]string, error) {
	var files []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		if d.Type().IsRegular() {
			rel, err := filepath.Rel(dir, path)
			if err != nil {
				return err
			}
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	return files, err
}

// Files lists the config files in the work tree, relative to ConfigDir.
func (e *Env) Files() ([]string, error) { return configFiles(e.ConfigDir) }

// OpenHome takes the lock of an installed home and opens its config store
// without serving, for operator tools that must write beside no server
// (mcpkeep rollback, doctor --fix). It returns a *LockedError while a server
// runs. Like Run, it logs each stale lock file it reclaimed as a warning,
// and the config store logs what it repaired. Close the Env with the
// returned func.
func OpenHome(home string, logger *slog.Logger) (*Env, func() error, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	lock, err := TryLock(home)
	if err != nil {
		return nil, nil, err
	}
	for _, r := range lock.Reclaimed() {
		logger.Warn("reclaimed a stale lock", "detail", r)
	}
	configDir := filepath.Join(home, "config")
	store, err := gitstore.Open(configDir, &gitstore.Options{HoldsLock: true, Logger: logger})
	if err != nil {
		return nil, nil, errors.Join(err, lock.Unlock())
	}
	env := &Env{Home: home, ConfigDir: configDir, Store: store, Logger: logger}
	closeFn := func() error { return errors.Join(store.Close(), lock.Unlock()) }
	return env, closeFn, nil
}
