package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpkeep/mcpkeep/bootstrap"
	"github.com/mcpkeep/mcpkeep/gitstore"
	"github.com/mcpkeep/mcpkeep/internal/failpoint"
	"github.com/mcpkeep/mcpkeep/lifecycle/internal/attach"
	"github.com/mcpkeep/mcpkeep/lifecycle/internal/mcpserve"
	"github.com/mcpkeep/mcpkeep/statefile"
)

// writer is what the writer's start-up, serving and hand-over share.
type writer struct {
	h          *Harness
	lock       *HomeLock
	fwd        *attach.Forwarder // the process's own client after a takeover; nil otherwise
	statePath  string
	env        *Env
	server     *mcp.Server
	running    *runningCalls // the tool calls being handled, for a shutdown that cannot wait for them
	http       net.Listener  // nil when HTTP is off
	token      string
	reg        *statefile.Registry // set by announce once registered; nil when off or when registering failed
	registered bool

	sock         *net.UnixListener // the attach socket; nil when attaching is off
	sockPath     string
	unlistenOnce sync.Once
	attached     *attach.Listener
	changes      chan struct{} // the attached sessions or the own client changed
	ownRecorded  atomic.Bool   // the own client is in st (recordOwnClient)

	elect        *election           // nil unless Options.Elector is set
	remoteStatus *remoteStatusWriter // the git remote's status, for the state file

	mu sync.Mutex // guards st
	st statefile.State
}

// live is the state record with the role as it is now (the record has it
// as of its last change).
func (w *writer) live() statefile.State {
	s := w.snapshot()
	if w.elect != nil {
		c := w.elect.status()
		s.Cluster = &c
	}
	return s
}

// recordCluster writes a change of role into the state file and the
// registry.
func (w *writer) recordCluster(c statefile.Cluster) {
	if err := w.update(func(s *statefile.State) { s.Cluster = &c }); err != nil {
		w.h.log.Warn("could not record the role in the state file", "path", w.statePath, "err", err)
	}
	if w.reg != nil {
		if err := w.reg.Register(w.h.opts.Home, w.snapshot()); err != nil {
			w.h.log.Warn("registry: could not record the role", "err", err)
		}
	}
}

// beforeActive runs each time the Elector elects this server, before it
// serves as the active writer. A home replicated through a git remote
// first catches up with what the last writer pushed: in sync mode every
// change the last writer acknowledged is on the remote, so a fetch that
// fails resigns the term (another host, or a later campaign, takes it);
// in async mode the remote never had every acknowledged change, and a
// failed fetch is only logged. Then Options.BeforeActive runs. Changes
// are refused until it returns nil.
func (w *writer) beforeActive(ctx context.Context) error {
	if err := failpoint.Hit("lifecycle.elected-before-catch-up"); err != nil {
		return err
	}
	if r := w.env.Remote; r != nil {
		if _, err := r.Fetch(ctx); err != nil {
			if r.Mode() == gitstore.RemoteSync {
				return fmt.Errorf("lifecycle: elected, but could not catch up with the git remote, which has every change the last writer acknowledged: %w", err)
			}
			w.h.log.Warn("elected: could not fetch the git remote first; serving as the writer with what this home has", "err", err)
		}
	}
	if f := w.h.opts.BeforeActive; f != nil {
		return f(ctx, w.env)
	}
	return nil
}

func (w *writer) snapshot() statefile.State {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.st
}

// update changes the state record and writes the state file.
func (w *writer) update(change func(*statefile.State)) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	change(&w.st)
	return statefile.Write(w.statePath, &w.st)
}

// bindSocket listens on the attach socket. Without it the server still
// runs; processes launched on the home meanwhile cannot attach, and say so.
func (w *writer) bindSocket() {
	path := attach.Path(w.h.opts.Home)
	sock, err := attach.Listen(path)
	if err != nil {
		w.h.log.Error("attach: cannot listen on the socket, so processes launched on this home will not attach to this one", "err", err)
		return
	}
	w.sock, w.sockPath = sock, path
}

// unlisten closes the attach socket and removes its file: the first step
// of a handover, so that no process dials a writer that is leaving.
func (w *writer) unlisten() {
	w.unlistenOnce.Do(func() {
		if w.sock != nil {
			if err := attach.Unlisten(w.sock, w.sockPath); err != nil {
				w.h.log.Warn("attach: could not remove the socket", "path", w.sockPath, "err", err)
			}
		}
	})
}

func (w *writer) closeHTTP() {
	if w.http != nil {
		w.http.Close() // mcpserve may have closed it already
	}
}

// route says how the client of ss reaches the server.
func (w *writer) route(ss *mcp.ServerSession) Route {
	r := Route{PID: os.Getpid(), WriterPID: os.Getpid()}
	if w.attached == nil || ss == nil {
		return r
	}
	if s, ok := w.attached.Lookup(ss); ok && !s.Own {
		r.Attached, r.PID = true, s.PID
	}
	return r
}

// serve serves the server until the writer's own client goes, ctx is
// cancelled, a transport fails or announce fails, then hands over: it
// closes the attach socket, stops reading every client, lets their calls
// in flight finish (bounded by ShutdownTimeout) and tells each attached
// process which requests it did not read. announce runs once every
// transport serves; the health checks and the record of attached sessions
// start after it. serve returns mcpserve's error (or the own forwarder's)
// and announce's.
func (w *writer) serve(ctx context.Context, announce func() error) (serveErr, announceErr error) {
	h, o, log := w.h, &w.h.opts, w.h.log
	serveCtx, cancel := context.WithCancel(ctx)
	defer cancel()

	attached, err := attach.NewListener(attach.ListenerOptions{
		Server:   w.server,
		Me:       attach.Hello{Name: o.Name, Version: o.Version, Toolkit: bootstrap.ToolkitVersion()},
		OnChange: w.changed,
		Logger:   log,
	})
	if err != nil {
		return err, nil
	}
	w.attached, w.changes = attached, make(chan struct{}, 1)

	var g sync.WaitGroup
	// The config repository's housekeeping, off the change path: it
	// writes the journal to the repository and packs (gitstore). It runs
	// until the calls of every client have been answered.
	maintainCtx, stopMaintain := context.WithCancel(context.WithoutCancel(ctx))
	defer stopMaintain()
	g.Go(func() { w.env.Store.Maintain(maintainCtx) })
	var once sync.Once
	started := func() {
		once.Do(func() {
			g.Go(func() {
				if announceErr = announce(); announceErr != nil {
					cancel()
					return
				}
				g.Go(func() { h.healthLoop(serveCtx, w.lock, w.statePath, w.update) })
				if w.elect != nil {
					g.Go(func() { w.elect.run(serveCtx) })
				}
				if w.env.Remote != nil {
					// Fetches and merges every interval; in async
					// mode, pushes. Its status goes to the state file.
					g.Go(func() { w.env.Remote.Run(serveCtx) })
					g.Go(func() { w.remoteStatus.run(serveCtx, w.update, log) })
				}
				w.publish(serveCtx)
			})
		})
	}
	if w.sock != nil {
		g.Go(func() {
			if err := attached.Serve(w.sock); err != nil {
				log.Error("attach: the socket stopped accepting", "err", err)
			}
		})
	}
	var ownErr error
	if w.fwd != nil {
		// The process's own client, attached until now, reaches the
		// server through its forwarder, over a pipe.
		mine, theirs := net.Pipe()
		// Not in g: attached.Shutdown waits for it, and gives up
		// on a call that ignores its context.
		go attached.ServeOwn(mine)
		g.Go(func() {
			ownErr = w.fwd.Attach(serveCtx, theirs, os.Getpid())
			cancel()
		})
	}
	if stdio := w.fwd == nil && !o.NoStdio; stdio || w.http != nil {
		// The stdio session's requests carry stdioSession in their
		// context (recordOwnClient).
		serveErr = mcpserve.Serve(context.WithValue(serveCtx, stdioSession{}, true), w.server, mcpserve.Options{
			Stdio:           stdio,
			Stdin:           pollable(stdin(o)),
			Stdout:          o.Stdout,
			Listener:        w.http,
			Token:           w.token,
			Health:          func() any { return healthBody(w.live(), h.httpStats) },
			Standby:         w.standby,
			Limits:          mcpserve.Limits(o.HTTPLimits),
			Mode:            mcpserve.Mode(o.HTTPMode),
			Stats:           h.httpStats,
			ShutdownTimeout: o.ShutdownTimeout,
			Logger:          log,
			Started:         started,
		})
	} else {
		started()
		<-serveCtx.Done()
	}
	cancel()

	log.Info("shutting down", "reason", reason(ctx, serveErr), "attached", len(attached.Sessions()))
	w.unlisten()
	if err := failpoint.Hit("lifecycle.handover-before-drain"); err != nil {
		log.Error("handover", "err", err) // an injected error: hand over all the same
	}
	sctx, stop := context.WithTimeout(context.WithoutCancel(ctx), o.ShutdownTimeout)
	if err := attached.Shutdown(sctx); err != nil {
		log.Warn("handover: calls of attached clients still ran at ShutdownTimeout; their answers are lost", "err", err)
	}
	stop()
	w.running.logStuck(log, o.ShutdownTimeout)
	stopMaintain()
	g.Wait()
	if ownErr != nil && !errors.Is(ownErr, attach.ErrWriterGone) {
		serveErr = errors.Join(serveErr, ownErr)
	}
	return serveErr, announceErr
}

// standby reports whether HTTP MCP requests are refused, and the URL of
// the active writer to refer them to.
func (w *writer) standby() (bool, string) {
	if w.elect == nil {
		return false, ""
	}
	return w.elect.standby()
}

// changed tells publish that the attached sessions or the own client
// changed.
func (w *writer) changed() {
	select {
	case w.changes <- struct{}{}:
	default:
	}
}

// publish writes the attached sessions, and the server's own client once
// it has initialized (recordOwnClient), into the state file and the
// registry whenever they change, until ctx ends. Changes that come while
// it writes are written together next.
func (w *writer) publish(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.changes:
		}
		var sessions []statefile.Session
		for _, s := range w.attached.Sessions() {
			sessions = append(sessions, statefile.Session{PID: s.PID, Client: s.Client, ClientVersion: s.ClientVersion, Since: s.Since})
		}
		if err := w.update(func(s *statefile.State) { s.Sessions = sessions }); err != nil {
			w.h.log.Warn("could not record the attached sessions in the state file", "path", w.statePath, "err", err)
		}
		if w.reg != nil {
			if err := w.reg.Register(w.h.opts.Home, w.snapshot()); err != nil {
				w.h.log.Warn("registry: could not record the attached sessions", "err", err)
			}
		}
	}
}
