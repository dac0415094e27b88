package lifecycle

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"

	"github.com/mcpkeep/mcpkeep/atomicfile"
	"github.com/mcpkeep/mcpkeep/bootstrap"
	"github.com/mcpkeep/mcpkeep/gitstore"
	"github.com/mcpkeep/mcpkeep/internal/failpoint"
	"github.com/mcpkeep/mcpkeep/lifecycle/internal/attach"
	"github.com/mcpkeep/mcpkeep/lifecycle/internal/mcpserve"
	"github.com/mcpkeep/mcpkeep/portmgr"
	"github.com/mcpkeep/mcpkeep/recovery"
	"github.com/mcpkeep/mcpkeep/statefile"
)

// Run starts the server and blocks until it stops. A home has one writer,
// the process that holds its lock, and any number of clients: a process
// that finds the home locked attaches to the writer (see Attaching below)
// unless Options.Exclusive is set or stdio is off, and then Run returns
// the *LockedError.
//
// As the writer, in order, Run: refuses a home that is a file or inside
// one, or that this user cannot create (an *OptionsError naming
// Options.Home), default files it cannot read (naming
// Options.Spec.Defaults, on every start, not only the install that
// reads them), and a directory that holds
// files that are not a home's (an error matching ErrNotHome; nothing is
// written into it), takes the home lock, bootstraps the home, runs start-up recovery,
// binds the HTTP listener and the attach socket, builds the server with
// Options.NewServer and serves stdio, HTTP and attached clients on it.
// Only then it records the boot in the home's stamp and registers in the
// registry, at once, and writes the state file (status ready, with a
// fresh bearer token), last: the first answer does not wait for them, and
// a ready state file means the start is complete. Neither
// the state file nor the registry ever names a server that does not
// answer yet. A state file or boot record that cannot be written stops the
// server, and is Run's error. It stops when ctx is cancelled, on SIGINT,
// SIGTERM or SIGHUP (unless the process started with SIGHUP ignored, as
// under nohup), when its own client goes (stdin reaches EOF), or on a fatal
// transport error; then it hands over (it stops accepting, stops reading
// every client, finishes their calls in flight, bounded by
// ShutdownTimeout, and tells each attached process which requests it did
// not read, for the next writer), commits uncommitted config, removes the
// state file, unregisters and unlocks. It returns nil after a clean stop.
//
// A stop for a signal or ctx stops taking requests: a request already read
// from stdin or being served over HTTP is answered, but one not yet read
// from stdin is never read, and a new HTTP request is refused (503 Service
// Unavailable, or no connection once the listener is closed); the client
// must send those again to the next server. Every change the server
// answered is durable all the same: Env.Update commits before a tool
// returns, and what was changed by hand is committed before Run returns. A
// call still running at ShutdownTimeout loses its answer, and its change,
// made all or nothing, may or may not have happened; one whose tool
// ignores its context is logged by its tool's name and left running while
// Run returns (see Options.ShutdownTimeout).
//
// The lock is taken before bootstrap, not after: two first starts racing on
// one fresh home must not both install it.
//
// Unless Options.NoSignals is set, Run also keeps SIGPIPE from killing the
// process, for the rest of its life: a write to a closed stdout or stderr
// (a client that exited without waiting for the server) fails instead, and
// the shutdown goes on.
//
// # Attaching
//
// A process that finds the home locked takes no lock and opens no store:
// it dials the writer's unix socket and forwards its stdio client's
// messages to the writer and back, as one MCP session of the writer's. It
// retries for up to 30 seconds while the writer starts; a writer that
// takes no attached clients (Exclusive, or an older mcpkeep) or that
// refuses this process (another user) is Run's error, which matches
// ErrLocked. When the writer goes (a clean stop, SIGKILL, a crash) one of
// the attached processes takes the lock, with bootstrap and recovery as at
// any start, and becomes the writer; the others attach to it; each sets
// its client's session up again there without the client seeing it. A
// request the old writer never read is sent to the new one; a call it may
// have run gets a JSON-RPC error with code CodeOutcomeUnknown, never a
// second run. An attached process stops like a writer: when its client
// goes, on a signal or when ctx is cancelled, after answering the calls in
// flight.
func (h *Harness) Run(ctx context.Context) error {
	if h == nil || h.log == nil {
		return ErrNoHarness
	}
	if !h.opts.NoSignals {
		ignoreSIGPIPE()
		var stop context.CancelFunc
		ctx, stop = signal.NotifyContext(ctx, stopSignals()...)
		defer stop()
	}
	o := &h.opts
	if o.Elector != nil {
		defer func() {
			if cerr := o.Elector.Close(); cerr != nil {
				h.log.Warn("closing the Elector", "err", cerr)
			}
		}()
	}
	if err := checkHomeIsDir(o.Home); err != nil {
		return err
	}
	if err := checkDefaults(o.Spec.Defaults, o.Validate); err != nil {
		return err
	}
	if err := checkHomeDir(o.Home, o.Spec.Dirs); err != nil {
		return err // before the lock, which would write into the directory
	}
	if err := checkNotNested(o.Home); err != nil {
		return err
	}
	if err := createHome(o.Home); err != nil {
		return err
	}
	lock, err := TryLock(o.Home)
	switch {
	case errors.Is(err, ErrLocked) && !o.Exclusive && !o.NoStdio:
		h.startDone() // an attached process allocates little: nothing to defer
		return h.attach(ctx, err)
	case errors.Is(err, ErrLocked):
		return fmt.Errorf("%w; stop it or use another home", err)
	case errors.Is(err, fs.ErrPermission): // it says what to do
		return err
	case err != nil:
		return withRemedy(err, o.Home)
	}
	return h.write(ctx, lock, nil)
}

// write is the life of the writer, from the lock to its release. fwd is
// nil for a process that was the writer from its start; after a handover
// it is the Forwarder that carries the process's own client, which then
// reaches the server through it rather than through mcpserve's stdio.
func (h *Harness) write(ctx context.Context, lock *HomeLock, fwd *attach.Forwarder) (err error) {
	o, log := &h.opts, h.log
	h.warm()
	defer func() { err = errors.Join(err, lock.Unlock()) }()
	defer func() {
		if err != nil {
			err = withRemedy(err, o.Home)
		}
	}()
	for _, r := range lock.Reclaimed() {
		log.Warn("reclaimed a stale lock", "detail", r)
	}
	w := &writer{h: h, lock: lock, fwd: fwd, statePath: filepath.Join(o.Home, statefile.FileName), remoteStatus: newRemoteStatusWriter()}
	prev, _ := statefile.Read(w.statePath) // the last run's port, if any; recovery moves a stale file away

	spec := o.Spec
	spec.Home, spec.Logger, spec.DeferBoot = o.Home, log, true // the boot record is written below, beside other work
	spec.MaxFileSize = o.MaxFileSize                           // in the boot record, for the tools that read the home
	spec.Server = o.Name                                       // a home is one server's: the stamp names it
	git := h.gitOptions()
	spec.Git = git
	boot, err := bootstrap.Ensure(ctx, spec)
	if oe := specOptionsError(err); oe != nil {
		return oe // a Spec this home cannot use: no migration from its schema
	}
	if err != nil {
		return err
	}

	// The attach socket is bound while recovery runs: neither needs the
	// other, and a process that dials it meanwhile waits for the writer's
	// hello (attach.HelloTimeout) or dials again.
	bound := make(chan struct{})
	if o.Exclusive {
		close(bound)
	} else {
		go func() {
			defer close(bound)
			w.bindSocket()
		}()
		defer func() {
			<-bound
			w.unlisten()
		}()
	}

	// recovery logs each finding, with its remedy, and hands on the config
	// repository it checked.
	report, store, err := recovery.RunAndOpen(ctx, recovery.Options{Home: o.Home, Validate: o.Validate, MaxFileSize: o.MaxFileSize, Git: git, Logger: log})
	if err != nil {
		return err
	}
	configDir := filepath.Join(o.Home, "config")
	if store == nil { // recovery could not open it and reported why; this says it again, as the error
		if store, err = gitstore.Open(configDir, git); err != nil {
			return err
		}
	}
	defer store.Close()

	ln, err := h.listen(ctx, prev)
	if err != nil {
		if o.NoStdio {
			return err // no transport left to serve
		}
		log.Error("HTTP transport off: could not bind; serving stdio only", "addr", o.HTTP, "err", err)
	}
	if ln != nil && exposed(ln.Addr()) {
		log.Warn("HTTP: other machines can reach this server; every request still needs the bearer token (bind 127.0.0.1 to serve this machine alone)",
			"addr", ln.Addr().String())
	}
	w.http = ln
	defer w.closeHTTP()
	if ln != nil && !o.NoToken {
		if w.token, err = homeToken(o.Home, log); err != nil {
			return err
		}
	}
	<-bound

	if w.st, err = statefile.New(o.Name, o.Home); err != nil {
		return err
	}
	st := &w.st
	st.Version, st.ToolkitVersion, st.Stdio, st.Token, st.Socket = o.Version, bootstrap.ToolkitVersion(), !o.NoStdio, w.token, w.sockPath
	if ln != nil {
		port := ln.Addr().(*net.TCPAddr).Port
		host, _, _ := net.SplitHostPort(o.HTTP)
		st.HTTP = &statefile.HTTP{Host: host, Port: port, URL: statefile.URL(host, port)}
	}
	env := &Env{Home: o.Home, ConfigDir: configDir, Store: store, Logger: log, Boot: boot, Report: report,
		MaxFileSize: o.MaxFileSize, Validate: o.Validate, state: w.live, route: w.route}
	w.env = env
	if o.Elector != nil {
		// A standby from the start: nothing is changed or served as
		// the writer until the Elector elects this server.
		me := writerInfo{URL: advertised(o.AdvertiseURL, st.HTTP), Host: hostname(), PID: st.PID}
		w.elect = newElection(o.Elector, me, log, w.beforeActive, w.recordCluster)
		env.fence = w.elect
		c := w.elect.status()
		st.Cluster = &c
	}
	var mayPush func() bool // without an Elector this server is always the writer
	if w.elect != nil {
		mayPush = w.elect.writing
	}
	if env.Remote, err = h.startRemote(ctx, env, w.remoteStatus.set, mayPush); err != nil {
		return err
	}
	if env.Remote != nil {
		defer env.Remote.Close()
		st.Remote = stateRemote(env.Remote.Status())
		w.remoteStatus.drop() // the catch-up's: in the first state file already
	}

	// The state file says ready: the transports are bound, and serving
	// starts as soon as the server is built. It carries a first health
	// check, a few cheap system calls, so that the state file and
	// server_info tell from the start, not after a full HealthInterval,
	// whether the home works.
	health := h.check(lock, "")
	if !health.OK {
		log.Error("health check failed", "problems", health.Problems)
	}
	w.mu.Lock()
	st.Status, st.Health = statefile.StatusReady, &health
	ready := *st
	w.mu.Unlock()

	// The server is built, and serves, before anything names it: the
	// first answer does not wait for the boot record, the state file and
	// the registry entry, which only discovery needs; they are written
	// as soon as every transport serves, so neither the state file nor
	// the registry names a server that does not answer yet.
	// Registration never depends on HTTP: stdio-only servers are listed
	// too.
	server, err := newServer(o.NewServer, env, log)
	if err != nil {
		return err
	}
	w.server = server
	w.running = newRunningCalls()
	server.AddReceivingMiddleware(w.running.middleware)
	if fwd != nil || !o.NoStdio { // a server without stdio has no own client
		server.AddReceivingMiddleware(w.recordOwnClient)
	}
	if w.elect != nil {
		server.AddReceivingMiddleware(w.elect.middleware)
	}
	defer func() { // after a failed write too: Remove leaves alone a file not ours
		if rerr := statefile.Remove(w.statePath); rerr != nil {
			err = errors.Join(err, rerr)
		}
	}()
	defer func() {
		if w.registered {
			if uerr := w.reg.Unregister(o.Home); uerr != nil {
				log.Warn("registry: could not unregister", "err", uerr)
			}
		}
	}()
	log.Info("serving", "stdio", !o.NoStdio, "http", httpURL(st.HTTP), "socket", w.sockPath, "pid", st.PID,
		"schema", boot.After.Schema, "boots", boot.After.Boots, "took_over", fwd != nil)
	if w.http != nil {
		// The HTTP transport keeps a heap floor of its own (mcpserve),
		// which takes any pacing other than the runtime's for the
		// program's choice and steps aside: it must find the process's.
		h.startDone()
	}
	serveErr, announceErr := w.serve(ctx, func() error { return w.announce(boot, ready) })

	_ = w.update(func(s *statefile.State) { s.Status = statefile.StatusStopping })
	if err := failpoint.Hit("lifecycle.before-shutdown-commit"); err != nil {
		return err
	}
	// A tool left behind (ShutdownTimeout) may hold the transactions'
	// turn for ever: the commit waits for it as long as the drain did.
	cctx, ccancel := context.WithTimeout(context.Background(), o.ShutdownTimeout)
	hash, cerr := env.commitWithin(cctx, "shutdown: commit uncommitted changes")
	ccancel()
	var left *gitstore.LeftOutError
	if errors.As(cerr, &left) {
		// Not the stop's failure: the rest is committed, and the next
		// start deals with these as it deals with any it finds.
		for _, f := range left.Files {
			log.Warn("left out of the shutdown commit: the next start moves it to backups/", "path", f.Path, "why", f.Err)
		}
		cerr = nil
	}
	if errors.Is(cerr, ErrNotActive) {
		log.Info("not the active writer: changes made by hand, if any, are left for the next start to commit", "err", cerr)
	} else if errors.Is(cerr, context.DeadlineExceeded) {
		log.Warn("a change left behind still holds the config: changes made by hand, if any, are left for the next start to commit")
	} else if cerr != nil {
		err = errors.Join(err, cerr)
	} else if hash != "" {
		log.Info("committed uncommitted config at shutdown", "commit", hash)
	}
	if env.Remote != nil && (w.elect == nil || w.elect.status().Role == statefile.RoleActive) {
		// What the remote lacks, one last try, bounded like the drain:
		// the next start pushes what this one could not. A standby
		// pushes nothing: the writer's history is the remote's.
		pctx, pcancel := context.WithTimeout(context.Background(), o.ShutdownTimeout)
		if perr := env.Remote.Push(pctx); perr != nil {
			log.Warn("remote: could not push at shutdown; the next start pushes", "err", perr)
		}
		pcancel()
	}
	if w.elect != nil {
		w.elect.stop()
	}
	if errors.Is(serveErr, mcpserve.ErrStdinClosed) || ctx.Err() != nil {
		serveErr = nil
	}
	return errors.Join(announceErr, err, serveErr)
}

// warm starts Options.Warm, if set, in a goroutine of its own, first
// thing once the process holds the lock: started any later, it finds less
// of the start left to overlap with, and a goroutine made during the start
// can wait a millisecond for the second core (BENCHMARKS.md, issue 13).
func (h *Harness) warm() {
	if h.opts.Warm == nil {
		return
	}
	go func() {
		defer func() {
			if r := recover(); r != nil {
				h.log.Error("Options.Warm panicked; NewServer does its work", "panic", r, "stack", string(debug.Stack()))
			}
		}()
		h.opts.Warm()
	}()
}

// announce writes what tells others the writer serves: the boot record
// and the registry entry, at once, then the state file (ready), last, so
// that a ready state file means the start is complete. A failed
// registration is only logged; a failed state file or boot record is the
// error, which stops the server.
func (w *writer) announce(boot bootstrap.Result, ready statefile.State) error {
	var (
		prep            sync.WaitGroup
		bootErr, regErr error
	)
	reg := w.h.registry()
	if reg != nil {
		prep.Go(func() { regErr = reg.Register(w.h.opts.Home, ready) })
	}
	bootErr = boot.RecordBoot()
	prep.Wait()
	if reg != nil && regErr == nil {
		w.reg, w.registered = reg, true
	} else if reg != nil {
		w.h.log.Warn("registry: could not register; discovery by `mcpkeep servers` will miss this server", "err", regErr)
	}
	if bootErr != nil {
		return fmt.Errorf("record the boot: %w", bootErr)
	}
	if err := statefile.Write(w.statePath, &ready); err != nil {
		return err
	}
	w.h.startDone()
	return failpoint.Hit("lifecycle.after-state-write")
}

// listen binds the HTTP listener, preferring the port in the address, then
// the last run's port, then a stable port for the home. It returns a nil
// listener when HTTP is off. A failure to bind is Run's error only when
// stdio is off; otherwise the server runs on stdio alone.
func (h *Harness) listen(ctx context.Context, prev *statefile.State) (net.Listener, error) {
	o := &h.opts
	if o.HTTP == "" {
		return nil, nil
	}
	host, portStr, _ := net.SplitHostPort(o.HTTP)
	asked, _ := strconv.Atoi(portStr) // New checked it
	preferred := asked
	if preferred == 0 && prev != nil && prev.HTTP != nil && prev.HTTP.Port > 0 && prev.HTTP.Port <= 65535 {
		preferred = prev.HTTP.Port // a port out of range in a stale file is no preference
	}
	ln, err := portmgr.Listen(ctx, portmgr.Options{
		Host:             host,
		Preferred:        preferred,
		Key:              o.Home,
		AllowNonLoopback: true, // New accepted the address as given
	})
	if err != nil {
		return nil, fmt.Errorf("lifecycle: HTTP address %s cannot be served: %w", o.HTTP, err)
	}
	if port := ln.Addr().(*net.TCPAddr).Port; asked != 0 && port != asked {
		h.log.Warn("HTTP: the port asked for is taken; serving on another", "asked", o.HTTP, "url", statefile.URL(host, port))
	}
	return ln, nil
}

// gitOptions returns the options of the config repository: the author and
// pack threshold of Options.Spec.Git, with the lock held, writable,
// Options.MaxFileSize, and the harness's logger unless Spec.Git sets one.
func (h *Harness) gitOptions() *gitstore.Options {
	var g gitstore.Options
	if h.opts.Spec.Git != nil {
		g = *h.opts.Spec.Git
	}
	g.HoldsLock, g.ReadOnly = true, false
	g.MaxFileSize = h.opts.MaxFileSize
	if g.Logger == nil {
		g.Logger = h.log
	}
	return &g
}

func (h *Harness) registry() *statefile.Registry {
	if h.opts.NoRegistry {
		return nil
	}
	path := h.opts.Registry
	if path == "" {
		path = statefile.DefaultRegistryPath()
	}
	if path == "" {
		return nil
	}
	return statefile.NewRegistry(path)
}

// exposed reports whether a listener bound to addr can be reached from
// other machines: it is not bound to a loopback address.
func exposed(addr net.Addr) bool {
	tcp, ok := addr.(*net.TCPAddr)
	return !ok || !tcp.IP.IsLoopback()
}

func newToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return hex.EncodeToString(b)
}

// homeToken returns the home's bearer token from its TokenFile, making
// one when there is none: every writer of the home, after a restart or a
// handover, takes the same token, as it takes the same port, so that a
// client configured with both keeps working. A file that is not a token
// only this user reads (cut short, edited, a link, another user's, or
// open to group or others) is replaced with a new token, and said so: a
// token others could read is no longer secret.
func homeToken(home string, log *slog.Logger) (string, error) {
	path := filepath.Join(home, bootstrap.TokenFile)
	t, why, err := readToken(path)
	switch {
	case err != nil:
		return "", withRemedy(fmt.Errorf("lifecycle: read the HTTP bearer token: %w", err), home)
	case t != "":
		return t, nil
	case why != "":
		log.Warn("the home's HTTP token file cannot be trusted; making a new token", "path", path, "why", why)
	}
	t = newToken()
	if err := atomicfile.WriteFile(path, []byte(t+"\n"), 0o600); err != nil {
		return "", withRemedy(fmt.Errorf("lifecycle: write the HTTP bearer token: %w", err), home)
	}
	return t, nil
}

// readToken returns the token in the file at path, or why it is not to be
// trusted, or neither when there is no file. It judges the file it read,
// not the path, which may change in between.
func readToken(path string) (token, why string, err error) {
	data, uid, perm, err := atomicfile.Reader{MaxSize: 1024}.ReadOwned(path)
	var refused *atomicfile.RefusedError
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", "", nil
	case errors.As(err, &refused):
		return "", refused.Error(), nil
	case err != nil:
		return "", "", err
	case uid != os.Geteuid():
		return "", fmt.Sprintf("it belongs to uid %d", uid), nil
	case perm&0o077 != 0:
		return "", fmt.Sprintf("its mode %v lets others read it", perm), nil
	}
	if t := strings.TrimSpace(string(data)); isToken(t) {
		return t, "", nil
	}
	return "", "it holds no token", nil
}

// isToken reports whether t is a token newToken makes: 64 hex digits.
func isToken(t string) bool {
	if len(t) != 64 {
		return false
	}
	_, err := hex.DecodeString(t)
	return err == nil
}

func httpURL(h *statefile.HTTP) string {
	if h == nil {
		return ""
	}
	return h.URL
}

func reason(ctx context.Context, serveErr error) string {
	switch {
	case errors.Is(serveErr, mcpserve.ErrStdinClosed):
		return "stdin closed"
	case ctx.Err() != nil:
		return "signal or context"
	case serveErr != nil:
		return serveErr.Error()
	}
	return "transports ended"
}
