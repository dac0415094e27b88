package lifecycle

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

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
// Rollback and Files work the same, and State has only Home. The Store
// then writes its journal to the repository when it is closed (a Harness
// runs gitstore's Maintain beside the server, which does it as it goes).
type Env struct {
	Home      string           // absolute home directory
	ConfigDir string           // <home>/config, a git repository
	Store     *gitstore.Store  // the config repository; write through Update
	Logger    *slog.Logger     // never nil
	Boot      bootstrap.Result // what bootstrap found and did: installed, resumed, upgraded, boots
	Report    recovery.Report  // what start-up recovery found and did
	// MaxFileSize is the largest config file Reader reads and a
	// transaction writes (0 means atomicfile.DefaultMaxSize):
	// Options.MaxFileSize.
	MaxFileSize int64
	// Validate, if set, checks each config file a transaction writes
	// beyond its YAML or JSON syntax, as start-up recovery checks the
	// files it finds (recovery.CheckConfig): content it refuses is not
	// written, as the next start would quarantine it. path is relative to
	// ConfigDir. A Harness sets it to Options.Validate; OpenHome and a
	// struct literal leave it nil (syntax alone), for the caller to set
	// before its first change.
	Validate func(path string, data []byte) error
	// Remote replicates Store through a git remote (Options.Remote), nil
	// when there is none. In sync mode Update returns an error matching
	// gitstore.ErrRemote, the change made nowhere, when the remote
	// cannot take it.
	Remote *gitstore.Remote

	once sync.Once
	turn chan struct{} // held while a transaction's function runs and its commit is staged
	// inFn is the id of the goroutine running a transaction's function,
	// fnRuns while one runs whose goroutine was not noted (see prepare),
	// 0 when none: a change that goroutine asks for waits for itself
	// (ErrNested).
	inFn atomic.Uint64
	mu   sync.Mutex // guards pending
	// pending holds, for each path a transaction not yet in place wrote,
	// what the last of them staged, so that later transactions read it.
	pending map[string]pendingWrite
	state   func() statefile.State         // nil outside a Harness
	route   func(*mcp.ServerSession) Route // nil outside a Harness
	fence   fence                          // nil unless the home's writer is elected among hosts
}

// fence keeps a server that is not the active writer of a home shared by
// several hosts (Options.Elector) from making or acknowledging a change.
type fence interface {
	// beforeChange is asked before a change is made.
	beforeChange(ctx context.Context, change string) error
	// beforeAck is asked once the change is durable as commit, before it
	// is acknowledged: a change made by a writer that lost its lease
	// meanwhile is not acknowledged.
	beforeAck(ctx context.Context, change, commit string) error
}

// beforeChange is the hook on the change path, before a change is made:
// nil, or a *NotActiveError when this server may not write.
func (e *Env) beforeChange(ctx context.Context, change string) error {
	if e.fence == nil {
		return nil
	}
	return e.fence.beforeChange(ctx, change)
}

// beforeAck is the hook on the change path between a change's durable
// commit and its acknowledgement: nil, or a *NotActiveError when the
// writer lost its lease before it could answer.
func (e *Env) beforeAck(ctx context.Context, change, commit string) error {
	if e.fence == nil || commit == "" {
		return nil
	}
	return e.fence.beforeAck(ctx, change, commit)
}

// pendingWrite is a path as a transaction not yet in place left it.
type pendingWrite struct {
	staged  *gitstore.Staged
	data    []byte
	removed bool
}

func (e *Env) init() {
	e.once.Do(func() {
		envs.Add(1)
		e.turn = make(chan struct{}, 1)
		e.pending = map[string]pendingWrite{}
	})
}

// Update makes one durable, all-or-nothing change to config files: it runs
// fn with a transaction, and when fn returns nil commits exactly the files
// fn wrote and removed through it, with message msg, and returns the new
// commit's hash ("" when fn changed nothing). It returns once the change
// is durable (its commit and new bytes are in the store's journal,
// fsynced, which the next start rolls forward if a power cut lost the
// renames), its files are in place and its commit is in the history that
// History and ReadAt read; git's own files follow within milliseconds
// (the flush of Store.Maintain, which the Harness runs, or Close).
// ctx is checked before fn runs and bounds the wait for the turn; once fn
// has returned nil the change is made whatever ctx does.
//
// Transactions take turns: fn runs when the previous transaction's
// function has returned, and sees its writes, so fn may choose what to
// write from what it reads without a lock of its own. Their commits are
// made durable together (a batch shares its fsyncs), each its own commit with
// its own message, in turn order. If fn returns an error or panics,
// nothing was written: Update returns the error, or the panic continues
// once the turn is given up. A path that is empty, not clean, outside
// ConfigDir or in .git is refused by the Tx method given it: a *PathError,
// matching lifecycle.ErrBadPath (this package's, not gitstore.ErrBadPath).
// A disk error is returned naming the files and what to do; a change that
// reached the disk but whose files could not all be put in place is
// returned with its hash and an error saying the next change, or the next
// start, finishes it. fn must not call Update, Commit or Rollback, which
// wait for fn's turn to end: called from fn's goroutine they return
// ErrNested at once (from another goroutine that fn waits for, they wait
// as long as fn does).
//
// On a home whose writer is elected among hosts (Options.Elector), the
// term is confirmed before fn runs and again once the change is durable:
// a server that is not the active writer refuses the change, and one that
// lost its term meanwhile does not acknowledge it (both a
// *NotActiveError, matching ErrNotActive; the second names the commit).
//
// Once the home is closed (OpenHome's close func was called, or
// Harness.Run returned), Update, Commit and Rollback change nothing and
// return an error matching gitstore.ErrClosed that says so.
//
// A msg in the words of bootstrap's own commits (bootstrap.OwnMessage:
// `install: schema N`, `migrate vA→vB`) is refused, by Commit too: a
// home whose stamp is lost is read by them.
func (e *Env) Update(ctx context.Context, msg string, fn func(tx *Tx) error) (string, error) {
	switch {
	case fn == nil && ctx != nil:
		return "", fmt.Errorf("lifecycle: Update(ctx, %q, nil): fn is nil; pass the function that makes the change", msg)
	case strings.TrimSpace(msg) == "" && ctx != nil:
		return "", fmt.Errorf("lifecycle: Update(ctx, %q, fn): msg is empty; give the change a commit message", msg)
	case bootstrap.OwnMessage(msg):
		return "", fmt.Errorf("lifecycle: Update(ctx, %q, fn): %w", msg, errOwnMessage)
	}
	return e.update(ctx, msg, fn, caller{"Update", []string{strconv.Quote(msg), "fn"}})
}

// caller names, for errors, the Env method a change came through and its
// arguments after ctx, as the caller wrote them.
type caller struct {
	method string
	args   []string
}

// call is the call the caller made, with ctx written as ctx.
func (c caller) call(ctx string) string {
	return c.method + "(" + strings.Join(append([]string{ctx}, c.args...), ", ") + ")"
}

// update is Update and Rollback, which c names in errors; they check
// their own arguments but ctx.
func (e *Env) update(ctx context.Context, msg string, fn func(tx *Tx) error, c caller) (string, error) {
	switch {
	case ctx == nil:
		return "", fmt.Errorf("lifecycle: %s: pass a context, such as context.Background()", c.call("nil"))
	case e.Store == nil || e.ConfigDir == "":
		return "", fmt.Errorf("lifecycle: %s on an Env without a Store or ConfigDir: make it with a Harness or OpenHome, or set both", c.method)
	}
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("lifecycle: %s: %w before it began; nothing was changed", c.call("ctx"), err)
	}
	if err := e.beforeChange(ctx, msg); err != nil {
		return "", err
	}
	if err := e.takeTurn(ctx, c.method); err != nil {
		return "", err
	}
	call := func() string { return c.call("ctx") }
	staged, paths, err := e.prepare(msg, fn)
	if err != nil {
		return "", e.failed(msg, paths, "unchanged", e.closed(call, err))
	}
	if staged == nil {
		return "", nil
	}
	if beforeWait != nil {
		beforeWait()
	}
	err = staged.Wait()
	e.forget(staged)
	if err != nil {
		var ue *gitstore.UnfinishedError
		if errors.As(err, &ue) {
			return staged.Hash(), withRemedy(fmt.Errorf("lifecycle: %q is committed as %s, but: %w", msg, ue.Commit, err), e.Home)
		}
		if errors.Is(err, gitstore.ErrRemote) {
			return "", fmt.Errorf("lifecycle: %q was not made: %w", msg, err)
		}
		return "", e.failed(msg, paths, "unchanged", e.closed(call, err))
	}
	if err := e.beforeAck(ctx, msg, staged.Hash()); err != nil {
		return "", err
	}
	return staged.Hash(), nil
}

// ErrNested is matched by the error of Update, Commit and Rollback called
// from inside the function of an Update, on its goroutine: they would
// wait for that function to return, which waits for them.
var ErrNested = errors.New("lifecycle: a change from inside an Update's function")

// takeTurn waits for the transactions' turn (what names the caller in
// errors), or for ctx. A call from inside a transaction's function is
// refused with ErrNested: the turn it waits for is its own.
func (e *Env) takeTurn(ctx context.Context, what string) error {
	e.init()
	select {
	case e.turn <- struct{}{}:
		return nil
	default:
	}
	// Held: by another transaction, or by the one this call is in.
	if holder := e.inFn.Load(); holder == fnRuns && inTransaction() || holder != fnRuns && holder != 0 && holder == goid() {
		return fmt.Errorf("%w: %s waits for the turn of the Update whose function called it, which waits for %s: "+
			"make the change through that function's tx, or call %s after Update returns", ErrNested, what, what, what)
	}
	select {
	case e.turn <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("lifecycle: %s: %w while it waited for its turn; nothing was changed", what, ctx.Err())
	}
}

// envs counts the Envs a process has used. With one, a function of a
// transaction on the calling goroutine's stack (inTransaction) can only be
// that Env's, and prepare notes no goroutine id: reading it costs a
// traceback of the whole stack, 2.6 us plus 0.4 us a frame, some 15 us at
// a tool handler's depth, on every change. With more, a function of one
// Env may change another, whose turn another goroutine holds: only the id
// tells them apart.
var envs atomic.Int64

// fnRuns is Env.inFn while a transaction's function runs on a goroutine
// whose id was not read.
const fnRuns = math.MaxUint64

// prepareFunc is the name runtime.Callers gives Env.prepare, which runs a
// transaction's function.
var prepareFunc = runtime.FuncForPC(reflect.ValueOf((*Env).prepare).Pointer()).Name()

// inTransaction reports whether the calling goroutine is inside a
// transaction's function: Env.prepare is on its stack.
func inTransaction() bool {
	pc := make([]uintptr, 256)
	frames := runtime.CallersFrames(pc[:runtime.Callers(2, pc)])
	for {
		f, more := frames.Next()
		if f.Function == prepareFunc {
			return true
		}
		if !more {
			return false
		}
	}
}

// goid returns the calling goroutine's id, which the first line of its
// stack gives ("goroutine 18 [running]:").
func goid() uint64 {
	var buf [64]byte
	b := bytes.TrimPrefix(buf[:runtime.Stack(buf[:], false)], []byte("goroutine "))
	var id uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			break
		}
		id = id*10 + uint64(c-'0')
	}
	return id
}

// beforeWait, when set, runs before each Update waits for its commit
// (tests).
var beforeWait func()

// prepare runs fn with a transaction and stages its commit, holding the
// turn, which it gives up when it returns or fn panics. It returns the
// staged commit, or nil when fn changed nothing, and the absolute paths
// fn wrote.
func (e *Env) prepare(msg string, fn func(tx *Tx) error) (*gitstore.Staged, []string, error) {
	defer func() { <-e.turn }()
	tx := &Tx{env: e, writes: map[string]*txWrite{}}
	defer func() { tx.closed = true }()
	if envs.Load() > 1 {
		e.inFn.Store(goid())
	} else {
		e.inFn.Store(fnRuns)
	}
	defer e.inFn.Store(0)
	if err := fn(tx); err != nil {
		return nil, nil, err
	}
	changes, paths := tx.changes()
	abs := make([]string, len(paths))
	for i, p := range paths {
		abs[i] = e.abs(p)
	}
	if len(changes) == 0 {
		return nil, abs, nil
	}
	staged, err := e.Store.Stage(msg, changes)
	if err != nil {
		if errors.Is(err, gitstore.ErrBadPath) {
			err = fmt.Errorf("lifecycle: %q was not made: %w", msg, err)
		}
		return nil, abs, err
	}
	if staged == nil {
		return nil, abs, nil
	}
	e.mu.Lock()
	for _, c := range changes {
		e.pending[c.Path] = pendingWrite{staged: staged, data: c.Data, removed: c.Remove}
	}
	e.mu.Unlock()
	return staged, abs, nil
}

// forget drops what pending holds for paths whose last writer was staged,
// once its files are in place.
func (e *Env) forget(staged *gitstore.Staged) {
	if !inPlace(staged) {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for p, w := range e.pending {
		if w.staged == staged || inPlace(w.staged) {
			delete(e.pending, p)
		}
	}
}

// inPlace reports whether the files of c's commit are on disk, or never
// will be: Apply is done with it, and it is not durable with its files
// still to be put in place (those are read from pending until they are).
func inPlace(c *gitstore.Staged) bool {
	done, err := c.Result()
	var ue *gitstore.UnfinishedError
	return done && !errors.As(err, &ue)
}

// staged returns what a waiting transaction staged for rel, if one did.
func (e *Env) staged(rel string) (data []byte, removed, ok bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	w, ok := e.pending[rel]
	if ok && inPlace(w.staged) {
		return nil, false, false // on disk now (or dropped)
	}
	return w.data, w.removed, ok
}

// stagedPaths returns the paths waiting transactions wrote (false) or
// removed (true).
func (e *Env) stagedPaths() map[string]bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make(map[string]bool, len(e.pending))
	for p, w := range e.pending {
		if !inPlace(w.staged) {
			out[p] = w.removed
		}
	}
	return out
}

// abs returns the absolute path of rel, a checked config path.
func (e *Env) abs(rel string) string { return filepath.Join(e.ConfigDir, filepath.FromSlash(rel)) }

// closed returns err, or, when it matches gitstore.ErrClosed, an error in
// the terms of call (the Env method and its arguments) that says the home
// is closed and what to do.
func (e *Env) closed(call func() string, err error) error {
	if !errors.Is(err, gitstore.ErrClosed) {
		return err
	}
	return fmt.Errorf("lifecycle: %s: the home %s is closed (OpenHome's close func was called, or Harness.Run returned), "+
		"so nothing was changed: open it again with lifecycle.OpenHome, or make the change while Run serves: %w",
		call(), e.Home, gitstore.ErrClosed)
}

// failed describes an update that did not happen: what it was, the files
// it touched and what became of them, and, for a disk or permission error,
// what to do about it.
func (e *Env) failed(msg string, files []string, fate string, err error) error {
	if r := remedy(err, e.Home); r != "" {
		what := "nothing was changed"
		if len(files) > 0 {
			what = strings.Join(files, ", ") + " " + fate
		}
		return &explained{prefix: fmt.Sprintf("%s failed, %s; %s", msg, what, r), err: err}
	}
	return err
}

// Commit commits every uncommitted change in the config repository, such as
// edits made by hand while the server runs, and returns the new hash or ""
// when there was nothing to commit. It waits for the transaction whose
// function runs, and applies those waiting first.
//
// What the next start would not keep is not committed: an entry that is
// not a regular file (a symbolic link, a named pipe), a file over
// MaxFileSize, and a changed file that recovery.CheckConfig refuses (a
// *.yaml that does not parse, content Validate refuses). Each stays as
// the last commit has it, the rest is committed, and Commit returns the
// new hash with an error matching *gitstore.LeftOutError (errors.As) that
// names them; the server's next start moves them to backups/.
func (e *Env) Commit(msg string) (string, error) {
	if bootstrap.OwnMessage(msg) {
		return "", fmt.Errorf("lifecycle: Commit(%q): %w", msg, errOwnMessage)
	}
	return e.commitWithin(context.Background(), msg)
}

// errOwnMessage refuses a commit message in the words of bootstrap's own
// commits, by which a home whose stamp is lost is read.
var errOwnMessage = errors.New("msg begins as the install and migrate commits of bootstrap do, which a home's schema is read from when its stamp is lost; give the change other words")

// commitWithin is Commit, waiting for the transactions' turn only until
// ctx ends (the shutdown's commit: a tool left behind may hold the turn
// for ever).
func (e *Env) commitWithin(ctx context.Context, msg string) (string, error) {
	if e.Store == nil {
		return "", errors.New("lifecycle: Commit on an Env without a Store: make it with a Harness or OpenHome")
	}
	if err := e.beforeChange(ctx, msg); err != nil {
		return "", err
	}
	hash, err := e.commit(ctx, msg)
	if hash == "" && err != nil {
		return "", err
	}
	if err := e.beforeAck(ctx, msg, hash); err != nil {
		return "", err
	}
	return hash, err // err: what was left out
}

// commit is Commit, waiting for the transactions' turn until ctx ends.
func (e *Env) commit(ctx context.Context, msg string) (string, error) {
	if err := e.takeTurn(ctx, "Commit"); err != nil {
		return "", err
	}
	defer func() { <-e.turn }()
	hash, err := e.Store.CommitChecked(msg, func(rel string, data []byte) error {
		return recovery.CheckConfig(rel, data, e.Validate)
	})
	var left *gitstore.LeftOutError
	if errors.As(err, &left) {
		return hash, fmt.Errorf("lifecycle: Commit(%q) left out what the next start would not keep, which stays as the last commit has it "+
			"(the server's next start moves it to backups/): %w", msg, err)
	}
	if err != nil {
		return "", withRemedy(e.closed(func() string { return fmt.Sprintf("Commit(%q)", msg) }, err), e.Home)
	}
	return hash, nil
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
// is never rewritten) and returns its hash, or "" when the files already
// equal rev. It is a transaction like Update's: every file of rev's tree
// is written with its bytes there, every file of HEAD's tree that rev
// lacks is removed, all or nothing across a crash; files never committed
// are left alone. rev is resolved in the transaction's turn, with every
// change before it applied: HEAD~1 names the commit before the last. An
// empty rev, or one that names no commit, is an error that changes
// nothing.
func (e *Env) Rollback(ctx context.Context, rev string) (string, error) {
	c := caller{"Rollback", []string{strconv.Quote(rev)}}
	if strings.TrimSpace(rev) == "" && ctx != nil {
		return "", fmt.Errorf("lifecycle: %s: rev is empty; give a commit hash (from Store.History or mcpkeep history), HEAD~N or a tag", c.call("ctx"))
	}
	return e.update(ctx, "rollback to "+rev, func(tx *Tx) error {
		// The commits staged before this turn, applied: HEAD is the last.
		if err := e.Store.Apply(); err != nil {
			return err
		}
		target, err := e.Store.Resolve(rev)
		if err != nil {
			return err
		}
		want, err := e.Store.FilesAt(target)
		if err != nil {
			return err
		}
		var have []string
		if head, err := e.Store.Head(); err != nil {
			return err
		} else if head != "" {
			if have, err = e.Store.FilesAt(head); err != nil {
				return err
			}
		}
		for _, f := range want {
			data, err := e.Store.ReadAt(target, f)
			if err != nil {
				return err
			}
			if cur, err := tx.ReadFile(f); err == nil && string(cur) == string(data) {
				continue
			}
			if err := tx.WriteFile(f, data); err != nil {
				return err
			}
		}
		for _, f := range have {
			if slices.Contains(want, f) {
				continue
			}
			if err := tx.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
		return nil
	}, c)
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
// (mcpkeep rollback and mcpkeep sync are built on it). It installs no
// home: a path CheckHome refuses, and a stamped home whose config
// repository is gone (a start finishes its install), is refused with an
// error matching ErrNotHome, and a missing one with an error matching
// both ErrNotHome and fs.ErrNotExist, before anything is created or
// written. It returns a *LockedError while anything else holds the home's
// lock: a server, another OpenHome, or `mcpkeep doctor --fix`, which
// takes the lock as OpenHome does and refuses likewise while the Env is
// open (`mcpkeep doctor` without --fix only reads, and runs beside any). Like Run, it logs each stale lock file
// it reclaimed as a warning, and the config store logs what it repaired.
// Like Run's start, it moves to backups/ the state file of a server that
// died (SIGKILL, a crash) without removing it, and removes its socket if
// nothing listens on it, logging each as a warning, so that status no
// longer shows a server that is gone. It reads and commits config files
// with the size limit the home's server last started with
// (HomeMaxFileSize), which Env.MaxFileSize holds. Close the Env with the
// returned func, which gives up the lock: after it, a change through the
// Env returns an error matching gitstore.ErrClosed.
func OpenHome(home string, logger *slog.Logger) (*Env, func() error, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if err := checkInstalled(home); err != nil {
		return nil, nil, err // before the lock, which would create the path or write into it
	}
	lock, err := TryLock(home)
	if err != nil {
		return nil, nil, err
	}
	for _, r := range lock.Reclaimed() {
		logger.Warn("reclaimed a stale lock", "detail", r)
	}
	clearDeadWriter(home, logger)
	limit := HomeMaxFileSize(home)
	configDir := filepath.Join(home, "config")
	store, err := gitstore.Open(configDir, &gitstore.Options{HoldsLock: true, Logger: logger, MaxFileSize: limit})
	if err != nil {
		return nil, nil, errors.Join(err, lock.Unlock())
	}
	env := &Env{Home: home, ConfigDir: configDir, Store: store, Logger: logger, MaxFileSize: limit}
	closeFn := func() error { return errors.Join(store.Close(), lock.Unlock()) }
	return env, closeFn, nil
}

// HomeMaxFileSize returns the largest config file the server of home
// reads, as its last start recorded it (Options.MaxFileSize, in the
// home's bootstrap stamp): 0 for atomicfile.DefaultMaxSize, a negative
// value for no limit. It is 0 too for a home whose stamp records none
// (written before mcpkeep recorded it) or cannot be read, which the next
// start reports. A tool that reads or repairs the home's config files
// without serving passes it where it gives a size limit
// (recovery.Options, gitstore.Options, atomicfile.Reader), so that it
// refuses what the server refuses and nothing else.
func HomeMaxFileSize(home string) int64 {
	info, err := bootstrap.Detect(home, 0)
	if err != nil {
		return 0
	}
	return info.MaxFileSize
}
