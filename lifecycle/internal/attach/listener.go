//go:build unix

package attach

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpkeep/mcpkeep/internal/failpoint"
)

// Session is one client session served by a Listener.
type Session struct {
	PID           int       // the attached process (0 for the writer's own client)
	Client        string    // the client's name, "" until it said
	ClientVersion string    // the client's version
	Since         time.Time // when the attached process began serving its client
	Own           bool      // the writer's own client, served through ServeOwn
}

// ListenerOptions configure a Listener.
type ListenerOptions struct {
	// Server serves every attached session; required.
	Server *mcp.Server
	// Me is what the writer says of itself in its hello; PID defaults to
	// this process's.
	Me Hello
	// OnChange, if set, is called whenever a session comes, goes or names
	// its client. It must not block: it runs on the session's goroutine.
	OnChange func()
	// Logger; nil = discard.
	Logger *slog.Logger
}

// Listener serves attached sessions of one *mcp.Server: Serve accepts them
// on a socket, ServeOwn serves the writer's own client when that client
// reaches the server through a Forwarder (after a handover). Shutdown ends
// them all. The zero value is not usable: build it with NewListener.
type Listener struct {
	opts ListenerOptions
	log  *slog.Logger

	wg sync.WaitGroup // every connection's goroutine

	mu       sync.Mutex
	closing  bool
	conns    map[io.Closer]struct{}          // connections not yet serving a session
	sessions map[*session]struct{}           // sessions being served
	bySS     map[*mcp.ServerSession]*session // the same, by go-sdk session
}

// NewListener returns a Listener for opts.
func NewListener(opts ListenerOptions) (*Listener, error) {
	if opts.Server == nil {
		return nil, errors.New("attach: ListenerOptions.Server is nil")
	}
	if opts.Me.PID == 0 {
		opts.Me.PID = os.Getpid()
	}
	opts.Me.Attach = ProtocolVersion
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Listener{opts: opts, log: log, conns: map[io.Closer]struct{}{},
		sessions: map[*session]struct{}{}, bySS: map[*mcp.ServerSession]*session{}}, nil
}

// Serve accepts connections on ln, one attached session each, until ln is
// closed; then it returns nil. An error accepting (too many open files)
// is logged and retried, backing off up to a second, as net/http does. It
// does not wait for the sessions: Shutdown does.
func (l *Listener) Serve(ln net.Listener) error {
	delay := time.Millisecond
	for {
		c, err := ln.Accept()
		if errors.Is(err, net.ErrClosed) {
			return nil
		}
		if err != nil {
			l.log.Warn("attach: accept failed; retrying", "err", err, "in", delay)
			time.Sleep(delay)
			delay = min(2*delay, time.Second)
			continue
		}
		delay = time.Millisecond
		if !l.track(c) {
			c.Close()
			continue
		}
		l.wg.Go(func() { l.serveConn(c) })
	}
}

// track records c as a connection to close at Shutdown; false if Shutdown
// has begun.
func (l *Listener) track(c io.Closer) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closing {
		return false
	}
	l.conns[c] = struct{}{}
	return true
}

func (l *Listener) untrack(c io.Closer) {
	l.mu.Lock()
	delete(l.conns, c)
	l.mu.Unlock()
}

// serveConn checks the peer, exchanges hellos and serves the session.
func (l *Listener) serveConn(c net.Conn) {
	defer c.Close()
	defer l.untrack(c)
	cred := Cred{UID: os.Getuid()}
	if uc, ok := c.(*net.UnixConn); ok {
		var err error
		if cred, err = PeerCred(uc); err != nil {
			l.refuse(c, err.Error())
			return
		}
	}
	if cred.UID != os.Getuid() {
		l.log.Warn("attach: refused a process of another user", "pid", cred.PID, "uid", cred.UID)
		l.refuse(c, fmt.Sprintf("it runs as uid %d, the writer as uid %d: only the writer's user may attach", cred.UID, os.Getuid()))
		return
	}
	c.SetDeadline(time.Now().Add(HelloTimeout))
	r := bufio.NewReader(c)
	peer, err := readHello(r)
	if err != nil {
		l.log.Warn("attach: no hello from an attaching process; closed", "pid", cred.PID, "err", err)
		return
	}
	if reason := OtherServer(peer.Name, l.opts.Me.Name); reason != "" {
		l.log.Warn("attach: refused a process of another server", "pid", cred.PID, "its_name", peer.Name)
		l.refuse(c, reason)
		return
	}
	if err := writeHello(c, l.opts.Me); err != nil {
		return
	}
	c.SetDeadline(time.Time{})
	if err := failpoint.Hit("attach.writer-after-hello"); err != nil {
		return
	}
	if peer.Version != l.opts.Me.Version || peer.Toolkit != l.opts.Me.Toolkit {
		l.log.Info("attach: a process of another build attached", "pid", cred.PID,
			"its_version", peer.Version, "its_toolkit", peer.Toolkit, "version", l.opts.Me.Version, "toolkit", l.opts.Me.Toolkit)
	}
	pid := cred.PID
	if pid == 0 {
		pid = peer.PID
	}
	since := peer.Since
	if since.IsZero() {
		since = time.Now()
	}
	l.run(Session{PID: pid, Since: since.UTC()}, readWriteCloser{r, c}, c)
}

// refuse tells the peer why it is refused.
func (l *Listener) refuse(c net.Conn, reason string) {
	c.SetDeadline(time.Now().Add(HelloTimeout))
	_ = writeHello(c, Hello{Attach: ProtocolVersion, PID: l.opts.Me.PID, Refused: reason})
}

// ServeOwn serves the writer's own client, whose messages reach the server
// through a Forwarder at the other end of rwc (an in-process pipe). It
// blocks until the session ends. The session is not listed by Sessions.
func (l *Listener) ServeOwn(rwc io.ReadWriteCloser) {
	if !l.track(rwc) {
		rwc.Close()
		return
	}
	l.wg.Add(1)
	defer l.wg.Done()
	defer l.untrack(rwc)
	l.run(Session{Own: true, Since: time.Now().UTC()}, rwc, rwc)
}

// run serves one session on rwc, whose connection is conn, until it ends.
func (l *Listener) run(info Session, rwc io.ReadWriteCloser, conn io.Closer) {
	s := newSession(l, info, conn)
	t := &sessionTransport{s: s, inner: &mcp.IOTransport{Reader: rwc, Writer: rwc}}
	ss, err := l.opts.Server.Connect(context.Background(), t, nil)
	if err != nil {
		l.log.Error("attach: could not start a session", "pid", info.PID, "err", err)
		rwc.Close()
		return
	}
	l.mu.Lock()
	if l.closing {
		s.stop(nil)
	}
	l.sessions[s] = struct{}{}
	l.bySS[ss] = s
	l.mu.Unlock()
	close(s.ready)
	if !info.Own {
		l.log.Info("attach: session attached", "pid", info.PID)
		l.changed()
	}
	err = ss.Wait()
	l.mu.Lock()
	delete(l.sessions, s)
	delete(l.bySS, ss)
	l.mu.Unlock()
	if !info.Own {
		if errors.Is(err, net.ErrClosed) || errors.Is(err, io.EOF) {
			// The client detached, or we closed the connection
			// ourselves: a normal end.
			l.log.Info("attach: session ended", "pid", info.PID, "client", s.snapshot().Client)
		} else {
			l.log.Info("attach: session ended", "pid", info.PID, "client", s.snapshot().Client, "err", err)
		}
		l.changed()
	}
}

func (l *Listener) changed() {
	if l.opts.OnChange != nil {
		l.opts.OnChange()
	}
}

// Sessions returns the attached sessions, oldest first, without the
// writer's own.
func (l *Listener) Sessions() []Session {
	l.mu.Lock()
	out := make([]Session, 0, len(l.sessions))
	for s := range l.sessions {
		if info := s.snapshot(); !info.Own {
			out = append(out, info)
		}
	}
	l.mu.Unlock()
	slices.SortFunc(out, func(a, b Session) int {
		if c := a.Since.Compare(b.Since); c != 0 {
			return c
		}
		return a.PID - b.PID
	})
	return out
}

// Lookup returns the session that ss serves, if ss is one of this
// Listener's.
func (l *Listener) Lookup(ss *mcp.ServerSession) (Session, bool) {
	l.mu.Lock()
	s, ok := l.bySS[ss]
	l.mu.Unlock()
	if !ok {
		return Session{}, false
	}
	return s.snapshot(), true
}

// Shutdown hands the sessions over: it stops taking connections (close the
// socket first, so no new process dials a writer that is leaving), stops
// reading every session, waits until each request it read is answered or
// ctx ends, then tells each forwarder which requests it read and did not
// answer, and closes the sessions. A forwarder sends the requests that
// were never read to the next writer. It returns when every session has
// ended: at once when ctx has ended, closing what is left. A session whose
// call still runs AbandonGrace after ctx ended (a tool that ignores its
// context, which the go-sdk waits for without a time limit) is abandoned:
// Shutdown returns ErrAbandoned, wrapped with ctx's error.
func (l *Listener) Shutdown(ctx context.Context) error {
	l.mu.Lock()
	l.closing = true
	serving := map[io.Closer]bool{}
	sessions := make([]*session, 0, len(l.sessions))
	for s := range l.sessions {
		sessions = append(sessions, s)
		serving[s.conn] = true
	}
	var idle []io.Closer // in their hellos: no session to drain
	for c := range l.conns {
		if !serving[c] {
			idle = append(idle, c)
		}
	}
	l.mu.Unlock()
	for _, s := range sessions {
		s.stop(ctx.Done())
	}
	for _, c := range idle {
		c.Close()
	}
	done := make(chan struct{})
	go func() { l.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
	}
	l.mu.Lock()
	for c := range l.conns {
		c.Close()
	}
	l.mu.Unlock()
	grace := time.NewTimer(AbandonGrace)
	defer grace.Stop()
	select {
	case <-done:
		return ctx.Err()
	case <-grace.C:
		return fmt.Errorf("%w: %w", ErrAbandoned, ctx.Err())
	}
}

// AbandonGrace is how long Shutdown still waits for the sessions to end
// after its context ended and it closed their connections.
const AbandonGrace = time.Second

// ErrAbandoned says Shutdown returned with a session still running: one of
// its calls ignores its context.
var ErrAbandoned = errors.New("attach: a call still runs after the shutdown deadline; abandoned")

type readWriteCloser struct {
	io.Reader
	io.WriteCloser
}
