package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/mcpkeep/mcpkeep/bootstrap"
	"github.com/mcpkeep/mcpkeep/internal/failpoint"
	"github.com/mcpkeep/mcpkeep/internal/proc"
	"github.com/mcpkeep/mcpkeep/lifecycle/internal/attach"
	"github.com/mcpkeep/mcpkeep/lifecycle/internal/stdioconn"
	"github.com/mcpkeep/mcpkeep/statefile"
)

// CodeOutcomeUnknown is the JSON-RPC error code a client gets for a call
// that was in flight when the writer it reached stopped without answering
// it (SIGKILL, a crash): the call may or may not have taken effect. The
// message says how to check (the history of the home's config) before
// sending it again. Calls without effects (the reads of MCP) are sent to
// the next writer instead, and so is any call the writer never read.
const CodeOutcomeUnknown = attach.CodeOutcomeUnknown

// attachWait bounds how long a process that finds the home locked waits
// for a writer to answer at its socket: the writer may be starting (a first
// install, recovery of a large history) or handing over.
const attachWait = 30 * time.Second

// attachQuiet is how long connect waits for the writer without a word,
// and attachSayEvery how often it says it waits after that.
const (
	attachQuiet    = time.Second
	attachSayEvery = 5 * time.Second
)

// errClientGone: the client went away while no writer was reachable.
var errClientGone = errors.New("lifecycle: the client went away")

// attach serves the process's client through the home's writer, and
// through each writer after it, until the client goes, ctx ends, or this
// process becomes the writer itself (then it returns what write returns).
// locked is the error of the TryLock that sent it here.
func (h *Harness) attach(ctx context.Context, locked error) error {
	o, log := &h.opts, h.log
	in, out := pollable(stdin(o)), o.Stdout
	if out == nil {
		out = os.Stdout
	}
	// A bad line from the client is answered here, not forwarded, and
	// is not the session's end.
	client, err := (&stdioconn.Transport{Reader: in, Writer: out, Logger: log}).Connect(ctx)
	if err != nil {
		return err
	}
	fwd := attach.NewForwarder(client, attach.ForwarderOptions{
		Check: fmt.Sprintf("the history of the home's config (`git -C %s log`, or `mcpkeep history --home %s`)",
			filepath.Join(o.Home, "config"), o.Home),
		DrainTimeout: o.ShutdownTimeout,
		Logger:       log,
	})
	defer fwd.Close()
	me := attach.Hello{PID: os.Getpid(), Name: o.Name, Version: o.Version, Toolkit: bootstrap.ToolkitVersion(), Since: time.Now().UTC()}
	for {
		lock, conn, err := h.connect(ctx, fwd, me, locked)
		switch {
		case errors.Is(err, errClientGone) || ctx.Err() != nil:
			return nil
		case err != nil:
			return err
		case lock != nil:
			log.Info("took over as the home's writer")
			if err := failpoint.Hit("lifecycle.takeover-after-lock"); err != nil {
				return errors.Join(err, lock.Unlock())
			}
			return h.write(ctx, lock, fwd)
		}
		h.logAttached(conn.Writer)
		err = fwd.Attach(ctx, conn, conn.Writer.PID)
		if !errors.Is(err, attach.ErrWriterGone) {
			return err
		}
		select {
		case <-fwd.Gone():
			return nil // the client went too: nothing to carry over
		default:
		}
		if ctx.Err() != nil {
			return nil
		}
		log.Info("the home's writer went; taking over or attaching to the next", "err", err)
	}
}

// connect returns the home's lock, when this process is to be the writer,
// or a connection to the writer. It tries both in turn, backing off from a
// millisecond to 10, while the writer starts or hands over, for up to
// attachWait; it gives up at once when the writer takes no attached
// clients or refuses this one, with an error that matches ErrLocked. When
// the client goes meanwhile, it leaves (errClientGone) if no call of the
// client's waits for an answer or the writer is stuck, and otherwise goes
// on: a writer that is starting answers those calls once it serves.
func (h *Harness) connect(ctx context.Context, fwd *attach.Forwarder, me attach.Hello, locked error) (*HomeLock, *attach.Conn, error) {
	home := h.opts.Home
	start := time.Now()
	deadline := start.Add(attachWait)
	delay := time.Millisecond
	gone := fwd.Gone()
	defer h.sayWaiting(locked)()
	for {
		lock, err := TryLock(home)
		if err == nil {
			return lock, nil, nil
		}
		if !errors.Is(err, ErrLocked) {
			return nil, nil, withRemedy(err, home)
		}
		locked = err
		path, ok := h.socketOf()
		if !ok {
			return nil, nil, fmt.Errorf("%w; it takes no attached clients (it runs exclusive, or on an older mcpkeep): stop it or use another home", locked)
		}
		conn, err := h.dial(ctx, fwd, start.Add(attachQuiet), lockPID(locked), path, me)
		switch {
		case errors.Is(err, errClientGone):
			return nil, nil, err
		case ctx.Err() != nil:
			return nil, nil, ctx.Err()
		}
		if err == nil {
			// A writer of an older build does not judge the name.
			if reason := attach.OtherServer(me.Name, conn.Writer.Name); reason != "" {
				conn.Close()
				return nil, nil, fmt.Errorf("%w, and this process cannot attach to it: %s", locked, reason)
			}
			return nil, conn, nil
		}
		if !errors.Is(err, attach.ErrNoWriter) {
			return nil, nil, fmt.Errorf("%w, and this process cannot attach to it: %w", locked, err)
		}
		if time.Now().After(deadline) {
			return nil, nil, fmt.Errorf("%w; nothing answered at its socket %s for %v: stop it or use another home", locked, path, attachWait)
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, nil, ctx.Err()
		case <-gone:
			t.Stop()
			gone = nil // judged below, at every try from now on
		case <-t.C:
		}
		if gone == nil && h.leaveWithClient(fwd, lockPID(locked)) {
			return nil, nil, errClientGone
		}
		delay = min(2*delay, 10*time.Millisecond)
	}
}

// dial is attach.Dial that the client's end ends too, with errClientGone,
// once the connect that calls it began patience ago and leaveWithClient
// says so: a writer that takes the connection and does not answer
// (stopped, frozen) must not keep a process with nothing to wait for alive
// for the hello's timeout.
func (h *Harness) dial(ctx context.Context, fwd *attach.Forwarder, patience time.Time, writer int, path string, me attach.Hello) (*attach.Conn, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		select {
		case <-fwd.Gone():
		case <-ctx.Done():
			return
		}
		t := time.NewTimer(time.Until(patience))
		defer t.Stop()
		select {
		case <-t.C:
			if h.leaveWithClient(fwd, writer) {
				cancel(errClientGone)
			}
		case <-ctx.Done():
		}
	}()
	conn, err := attach.Dial(ctx, path, me)
	if cause := context.Cause(ctx); errors.Is(cause, errClientGone) {
		if conn != nil {
			conn.Close()
		}
		h.log.Info("the client went while the home's writer did not answer; leaving", "writer_pid", writer, "writer_stopped", proc.Stopped(writer))
		return nil, errClientGone
	}
	return conn, err
}

// leaveWithClient reports whether a process whose client has gone leaves
// now rather than wait for the home's writer, pid: when no call of the
// client's waits for an answer, or when the writer is stopped (SIGSTOP)
// and will not answer them. A writer that is starting (a large history's
// recovery, a remote's catch-up, an install) answers them once it serves.
func (h *Harness) leaveWithClient(fwd *attach.Forwarder, pid int) bool {
	return !fwd.Unanswered() || proc.Stopped(pid)
}

// sayWaiting logs, once connect has waited attachQuiet and every
// attachSayEvery after that, that the home's writer has not answered yet,
// and whether it is stopped, until the function it returns is called. A
// writer that hands over answers within milliseconds; one that does not
// for a second is starting a large home, stopped, frozen or overloaded,
// and the client waits on this process meanwhile.
func (h *Harness) sayWaiting(locked error) (stop func()) {
	pid := lockPID(locked)
	start := time.Now()
	var (
		mu      sync.Mutex
		stopped bool
		t       *time.Timer
	)
	mu.Lock()
	defer mu.Unlock()
	t = time.AfterFunc(attachQuiet, func() {
		mu.Lock()
		defer mu.Unlock()
		if stopped {
			return
		}
		h.log.Warn("the home's writer has not answered at its socket yet; waiting for it",
			"writer_pid", pid, "stopped", proc.Stopped(pid), "waited", time.Since(start).Round(100*time.Millisecond), "gives_up_after", attachWait)
		t.Reset(attachSayEvery)
	})
	return func() {
		mu.Lock()
		defer mu.Unlock()
		stopped = true
		t.Stop()
	}
}

// lockPID returns the PID a *LockedError names, or 0.
func lockPID(locked error) int {
	if le := (*LockedError)(nil); errors.As(locked, &le) {
		return le.PID
	}
	return 0
}

// socketOf returns the socket of the home's writer: the one its state file
// names, else the one attach.Path gives (the writer may not have written
// its state file yet). It returns false when the state file of a live,
// ready writer names no socket: that writer takes no attached clients.
func (h *Harness) socketOf() (string, bool) {
	path := attach.Path(h.opts.Home)
	st, err := statefile.Read(filepath.Join(h.opts.Home, statefile.FileName))
	if err != nil || !st.Alive() {
		return path, true
	}
	if st.Socket != "" {
		return st.Socket, true
	}
	return path, st.Status != statefile.StatusReady
}

// logAttached says which writer this process attached to, with both
// builds when they differ: attaching still works across builds, but a
// difference explains a difference in behaviour.
func (h *Harness) logAttached(w attach.Hello) {
	o := &h.opts
	if w.Version != o.Version || w.Toolkit != bootstrap.ToolkitVersion() {
		h.log.Warn("attached to the home's writer, a process of another build",
			"writer_pid", w.PID, "writer_version", w.Version, "writer_toolkit", w.Toolkit,
			"version", o.Version, "toolkit", bootstrap.ToolkitVersion())
		return
	}
	h.log.Info("attached to the home's writer", "writer_pid", w.PID)
}
