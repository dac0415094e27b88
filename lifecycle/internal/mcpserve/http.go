package mcpserve

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// httpServer is the Streamable HTTP transport with its guards and limits.
type httpServer struct {
	opts   Options
	limits Limits
	log    *slog.Logger
	server *mcp.Server
	stdio  *mcp.ServerSession // not ours to close
	stats  *Stats

	stateful  http.Handler // the go-sdk handler with sessions
	stateless http.Handler // the go-sdk handler without: 2026-07-28 and later
	sessions  *sessionTable
	ln        *connLimiter
	srv       *http.Server

	mu      sync.Mutex
	closing bool
	calls   sync.WaitGroup // POSTs in flight
}

func newHTTPServer(server *mcp.Server, stdio *mcp.ServerSession, opts Options, log *slog.Logger) *httpServer {
	limits := opts.Limits.withDefaults()
	stats := opts.Stats
	if stats == nil {
		stats = new(Stats)
	}
	h := &httpServer{opts: opts, limits: limits, log: log, server: server, stdio: stdio, stats: stats}
	getServer := func(*http.Request) *mcp.Server { return server }
	// The body is read, bounded, before either handler sees it.
	sdkLog := slog.New(transportHandler{log.Handler(), opts.Mode})
	h.stateful = mcp.NewStreamableHTTPHandler(getServer, &mcp.StreamableHTTPOptions{Logger: sdkLog, MaxRequestBodyBytes: -1})
	h.stateless = mcp.NewStreamableHTTPHandler(getServer, &mcp.StreamableHTTPOptions{Logger: sdkLog, MaxRequestBodyBytes: -1, Stateless: true})
	h.sessions = newSessionTable(limits, opts.clock, h.closeSession, stats, log)
	h.ln = newConnLimiter(opts.Listener, limits.MaxConnections, stats)

	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", h.healthz)
	mux.Handle("/mcp", h.guard(http.HandlerFunc(h.serveMCP)))
	h.srv = &http.Server{
		Handler:           h.checkHost(mux),
		ReadHeaderTimeout: positive(limits.ReadHeaderTimeout),
		IdleTimeout:       positive(limits.IdleTimeout),
		ConnState:         h.ln.connState,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	return h
}

// positive is d, or 0 (none, to net/http) when d is negative.
func positive(d time.Duration) time.Duration { return max(d, 0) }

// serve serves until shutdown; logStats runs beside it.
func (h *httpServer) serve() error {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { logStats(ctx, h.stats, h.log, logInterval) })
	stopFloor := keepHeapFloor(heapFloor)
	defer func() { stopFloor(); cancel(); wg.Wait() }()
	return h.srv.Serve(h.ln)
}

func (h *httpServer) healthz(w http.ResponseWriter, _ *http.Request) {
	body := any(map[string]bool{"ok": true})
	if h.opts.Health != nil {
		body = h.opts.Health()
	}
	w.Header().Set("Content-Type", "application/json")
	// A standby is not a server to route MCP clients to: a load
	// balancer's health check sees 503, and the body and header name
	// the active writer.
	if h.opts.Standby != nil {
		if standby, active := h.opts.Standby(); standby {
			if active != "" {
				w.Header().Set(ActiveHeader, active)
			}
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}
	json.NewEncoder(w).Encode(body)
}

// ActiveHeader is the response header in which a standby's 503 names the
// URL of the active writer.
const ActiveHeader = "Mcpkeep-Active"

// loopbackHost reports whether host (a Host header or URL host, with or
// without a port) names this machine's loopback interface.
func loopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// refuse answers a request whose body it has not read, and closes the
// connection after the answer instead of reading the body: a client that
// sends it slowly, or never, gets its answer at once and holds nothing.
// The body gets refuseGrace to arrive, so that a client that sent it whole
// sees the connection closed cleanly.
func refuse(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Connection", "close")
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(refuseGrace))
	http.Error(w, msg, status)
}

// refuseGrace is how long a refused request's body may still take to
// arrive before the connection is cut.
const refuseGrace = 250 * time.Millisecond

// checkHost refuses, on a loopback listener, a Host header that names
// another machine: a DNS-rebinding page reaches 127.0.0.1 under its own name.
func (h *httpServer) checkHost(next http.Handler) http.Handler {
	addr, _ := h.opts.Listener.Addr().(*net.TCPAddr)
	onLoopback := addr != nil && addr.IP.IsLoopback()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if onLoopback && !loopbackHost(r.Host) {
			refuse(w, http.StatusForbidden, "forbidden: Host "+r.Host+" is not this server's loopback address")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// guard checks Origin and the bearer token before anything else, refuses
// new requests while shutting down, and counts calls in flight.
func (h *httpServer) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if o := r.Header.Get("Origin"); o != "" {
			u, err := url.Parse(o)
			if err != nil || !loopbackHost(u.Host) {
				refuse(w, http.StatusForbidden, "forbidden: cross-origin request from "+o)
				return
			}
		}
		if h.opts.Token != "" {
			got, ok := bearer(r.Header.Get("Authorization"))
			if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(h.opts.Token)) != 1 {
				w.Header().Set("WWW-Authenticate", `Bearer realm="mcp"`)
				refuse(w, http.StatusUnauthorized, "unauthorized: send Authorization: Bearer <token> (the token is in the server's state file)")
				return
			}
		}
		if h.opts.Standby != nil {
			if standby, active := h.opts.Standby(); standby {
				msg := "standby: this server is not the active writer of its home; "
				if active != "" {
					w.Header().Set(ActiveHeader, active)
					msg += "the active writer serves at " + active
				} else {
					msg += "no active writer is elected yet: retry shortly"
				}
				w.Header().Set("Retry-After", "1")
				refuse(w, http.StatusServiceUnavailable, msg)
				return
			}
		}
		h.mu.Lock()
		if h.closing {
			h.mu.Unlock()
			refuse(w, http.StatusServiceUnavailable, "server is shutting down")
			return
		}
		if r.Method == http.MethodPost {
			h.calls.Add(1)
			done := sync.OnceFunc(h.calls.Done)
			defer done()
			r = r.WithContext(context.WithValue(r.Context(), callDoneKey{}, done))
		}
		h.mu.Unlock()
		next.ServeHTTP(w, r)
	})
}

// callDoneKey is the context key of the func that stops counting a POST
// as a call in flight.
type callDoneKey struct{}

// notACall stops counting r as a call that shutdown lets finish: a
// subscriptions/listen stream lasts until the session is closed.
func notACall(r *http.Request) {
	if done, ok := r.Context().Value(callDoneKey{}).(func()); ok {
		done()
	}
}

// bearer returns the token of an Authorization header of the Bearer
// scheme. The scheme is case-insensitive (RFC 9110 §11.1), and may be
// followed by more than one space; the token is compared as it is.
func bearer(header string) (string, bool) {
	scheme, token, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return strings.TrimLeft(token, " "), true
}

// shutdown lets POSTs in flight finish, closes every HTTP session (their
// open GET streams would hold http.Server.Shutdown forever, go-sdk #440),
// then shuts the server down; all bounded by ctx.
func (h *httpServer) shutdown(ctx context.Context) {
	h.mu.Lock()
	h.closing = true
	h.mu.Unlock()
	h.srv.SetKeepAlivesEnabled(false)
	done := make(chan struct{})
	go func() { h.calls.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		h.log.Warn("HTTP shutdown: calls still in flight at the deadline")
	}
	h.sessions.close()
	for ss := range h.server.Sessions() {
		if ss != h.stdio {
			ss.Close()
		}
	}
	if err := h.srv.Shutdown(ctx); err != nil {
		h.log.Warn("HTTP shutdown timed out; closing connections", "err", err)
		h.srv.Close()
	}
}
