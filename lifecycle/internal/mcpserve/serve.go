// Package mcpserve serves one go-sdk *mcp.Server over stdio and Streamable
// HTTP at once, and shuts both down gracefully. It works around gaps of
// the SDK: requests read just before stdin reaches EOF are answered
// instead of dropped (go-sdk #1061); HTTP sessions are closed before
// http.Server.Shutdown, which otherwise hangs on open GET streams (go-sdk
// #440); Origin is checked, not only Host; initialize-era clients (with
// sessions) and 2026-07-28 clients (stateless) are served on one endpoint,
// where the SDK serves one kind per handler; and what a client can hold is
// bounded (Limits): sessions expire and are capped, connections are capped
// and timed out, bodies are read against a deadline, and batches are
// refused where the session's protocol version forbids them. Every HTTP
// request but /healthz needs the bearer token, checked before anything is
// read. It does not decide where to listen: the caller passes a bound
// listener.
package mcpserve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpkeep/mcpkeep/lifecycle/internal/stdioconn"
)

// ErrStdinClosed is what Serve returns when it stopped because stdin
// reached EOF: the client that spawned the server went away.
var ErrStdinClosed = errors.New("mcpserve: stdin closed")

// DefaultShutdownTimeout bounds the drain of in-flight calls at shutdown.
const DefaultShutdownTimeout = 5 * time.Second

// AbandonGrace is how long Serve still waits for a session to end after
// ShutdownTimeout, once it asked it to close: a tool that ignores its
// context keeps its session open for ever (the go-sdk waits for every
// handler without a time limit), and Serve returns without it.
const AbandonGrace = time.Second

// Options say which transports to serve.
type Options struct {
	// Stdio serves newline-delimited JSON-RPC on Stdin and Stdout.
	Stdio  bool
	Stdin  io.Reader // os.Stdin when nil
	Stdout io.Writer // os.Stdout when nil
	// Listener, if not nil, serves Streamable HTTP at /mcp.
	Listener net.Listener
	// Token is the bearer token every HTTP request but /healthz must carry.
	// "" switches the check off; the caller must only do that on loopback.
	Token string
	// Health returns the JSON body of GET /healthz; it must hold no secret.
	Health func() any
	// Standby, if set, is asked before each MCP request over HTTP and
	// each GET /healthz: while it reports true, they get 503 with the URL
	// it returns in the ActiveHeader header (and MCP requests in the
	// body; /healthz's body is Health's): this server is not its home's
	// active writer.
	Standby func() (standby bool, active string)
	// Limits bound what HTTP clients can hold; zero fields take defaults.
	Limits Limits
	// Mode says which kinds of HTTP client are served; the zero value,
	// ModeBoth, serves initialize-era and 2026-07-28 clients.
	Mode Mode
	// Stats, if not nil, is kept current with the HTTP transport's
	// sessions and connections.
	Stats *Stats
	// ShutdownTimeout bounds the drain of in-flight calls; 0 means
	// DefaultShutdownTimeout. Serve returns at the latest AbandonGrace
	// after it, with calls still running if a tool ignores its context.
	ShutdownTimeout time.Duration
	Logger          *slog.Logger // nil = discard
	// Started, if set, is called once every transport serves, before
	// Serve waits for them: what is announced after it reaches a server
	// that answers.
	Started func()

	// clock, if set, is what the HTTP session table reads the time from
	// to tell how long a session has been idle; tests set it to expire a
	// session when they choose. Its timers still run on real time.
	clock func() time.Time
}

// Serve serves server until ctx is cancelled, stdin reaches EOF (stdio
// only), or no transport is left. Then it stops taking requests, lets calls
// in flight finish (bounded by ShutdownTimeout), closes HTTP sessions and
// the HTTP server. A session whose calls still run then (a tool that
// ignores its context) is abandoned AbandonGrace later, with a warning:
// Serve returns. It returns ErrStdinClosed after stdin EOF, nil after ctx
// was cancelled, and the error of a transport that failed otherwise. A
// failing HTTP transport does not stop a working stdio one.
func Serve(ctx context.Context, server *mcp.Server, opts Options) error {
	if !opts.Stdio && opts.Listener == nil {
		return errors.New("mcpserve: no transport: neither stdio nor a listener")
	}
	if opts.ShutdownTimeout <= 0 {
		opts.ShutdownTimeout = DefaultShutdownTimeout
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}

	var stdio *drainTransport
	var stdioSession *mcp.ServerSession
	stdioDone := make(chan error, 1)
	var stdinEnded <-chan struct{} // stays nil without stdio
	if opts.Stdio {
		in, out := opts.Stdin, opts.Stdout
		if in == nil {
			in = os.Stdin
		}
		if out == nil {
			out = os.Stdout
		}
		// A bad line from the client is answered, not the session's end.
		stdio = newDrainTransport(&stdioconn.Transport{Reader: in, Writer: out, Logger: log}, opts.ShutdownTimeout)
		ss, err := server.Connect(context.WithoutCancel(ctx), stdio, nil)
		if err != nil {
			return fmt.Errorf("mcpserve: stdio: %w", err)
		}
		stdioSession = ss
		stdinEnded = stdio.endCh
		log.Debug("stdio transport up")
		go func() { stdioDone <- ss.Wait() }()
	}

	var web *httpServer
	httpDone := make(chan error, 1)
	if opts.Listener != nil {
		web = newHTTPServer(server, stdioSession, opts, log)
		go func() { httpDone <- web.serve() }()
		log.Info("HTTP transport up", "addr", opts.Listener.Addr().String())
	}
	if opts.Started != nil {
		opts.Started()
	}

	var result error
	stdioOpen, httpOpen := opts.Stdio, opts.Listener != nil
	for stdioOpen || httpOpen {
		select {
		case <-ctx.Done():
			stdioOpen, httpOpen = false, false
		case <-stdinEnded:
			// Stdin is done and its calls drained (bounded by
			// ShutdownTimeout); the session ends once every handler
			// returned, which one that ignores its context never does.
			stdinEnded = nil
			grace := time.NewTimer(AbandonGrace)
			select {
			case err := <-stdioDone:
				stdioDone <- err // for the case below
			case <-grace.C:
				log.Warn("stdio: a call still runs after ShutdownTimeout; exiting without it "+
					"(like a crash: every change it made is all or nothing, and acknowledged ones are committed)",
					"shutdown_timeout", opts.ShutdownTimeout)
				go stdioSession.Close()
				stdioOpen, httpOpen = false, false
				stdioDone = nil
				log.Info("stdio transport ended", "err", "abandoned")
				result = ErrStdinClosed
			}
			grace.Stop()
		case err := <-stdioDone:
			stdioOpen = false
			stdioDone = nil
			log.Info("stdio transport ended", "err", err)
			result = ErrStdinClosed
			httpOpen = false // the client that spawned us is gone
		case err := <-httpDone:
			httpOpen = false
			httpDone = nil
			if err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("HTTP transport failed", "err", err)
				if !stdioOpen {
					result = fmt.Errorf("mcpserve: HTTP: %w", err)
				}
			}
		}
	}

	// Graceful shutdown, bounded by ShutdownTimeout.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), opts.ShutdownTimeout)
	defer cancel()
	var wg sync.WaitGroup
	if web != nil {
		wg.Go(func() { web.shutdown(sctx) })
	}
	if stdioSession != nil && stdioDone != nil {
		stdio.stop() // Read drains the calls in flight, then ends the session
		select {
		case <-stdioDone:
		case <-sctx.Done():
			go stdioSession.Close() // waits for every handler, without a time limit
			if !waitGrace(sctx, stdioDone) {
				log.Warn("stdio: a call still runs after ShutdownTimeout; exiting without it "+
					"(like a crash: every change it made is all or nothing, and acknowledged ones are committed)",
					"shutdown_timeout", opts.ShutdownTimeout)
			}
		}
	}
	all := make(chan struct{})
	go func() { wg.Wait(); close(all) }()
	if !waitGrace(sctx, all) {
		log.Warn("HTTP: a call still runs after ShutdownTimeout; exiting without it "+
			"(like a crash: every change it made is all or nothing, and acknowledged ones are committed)",
			"shutdown_timeout", opts.ShutdownTimeout)
	}
	log.Info("transports stopped")
	return result
}

// waitGrace waits for done until AbandonGrace after ctx ended, and reports
// whether done came.
func waitGrace[T any](ctx context.Context, done <-chan T) bool {
	select {
	case <-done:
		return true
	case <-ctx.Done():
	}
	grace := time.NewTimer(AbandonGrace)
	defer grace.Stop()
	select {
	case <-done:
		return true
	case <-grace.C:
		return false
	}
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
