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

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// httpServer is the Streamable HTTP transport with its guards.
type httpServer struct {
	opts    Options
	log     *slog.Logger
	server  *mcp.Server
	stdio   *mcp.ServerSession // not ours to close
	srv     *http.Server
	mu      sync.Mutex
	closing bool
	calls   sync.WaitGroup // POSTs in flight
}

func newHTTPServer(server *mcp.Server, stdio *mcp.ServerSession, opts Options, log *slog.Logger) *httpServer {
	h := &httpServer{opts: opts, log: log, server: server, stdio: stdio}
	mcpHandler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server },
		&mcp.StreamableHTTPOptions{Logger: log})
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", h.healthz)
	mux.Handle("/mcp", h.guard(mcpHandler))
	h.srv = &http.Server{Handler: h.checkHost(mux), ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	return h
}

func (h *httpServer) serve() error { return h.srv.Serve(h.opts.Listener) }

func (h *httpServer) healthz(w http.ResponseWriter, _ *http.Request) {
	body := any(map[string]bool{"ok": true})
	if h.opts.Health != nil {
		body = h.opts.Health()
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(body)
}

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

// checkHost refuses, on a loopback listener, a Host header that names
// another machine: a DNS-rebinding page reaches 127.0.0.1 under its own name.
func (h *httpServer) checkHost(next http.Handler) http.Handler {
	addr, _ := h.opts.Listener.Addr().(*net.TCPAddr)
	onLoopback := addr != nil && addr.IP.IsLoopback()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if onLoopback && !loopbackHost(r.Host) {
			http.Error(w, "forbidden: Host "+r.Host+" is not this server's loopback address", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// guard checks Origin and the bearer token, refuses new requests while
// shutting down, and counts calls in flight.
func (h *httpServer) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if o := r.Header.Get("Origin"); o != "" {
			u, err := url.Parse(o)
			if err != nil || !loopbackHost(u.Host) {
				http.Error(w, "forbidden: cross-origin request from "+o, http.StatusForbidden)
				return
			}
		}
		if h.opts.Token != "" {
			got, ok := bearer(r.Header.Get("Authorization"))
			if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(h.opts.Token)) != 1 {
				w.Header().Set("WWW-Authenticate", `Bearer realm="mcp"`)
				http.Error(w, "unauthorized: send Authorization: Bearer <token> (the token is in the server's state file)", http.StatusUnauthorized)
				return
			}
		}
		h.mu.Lock()
		if h.closing {
			h.mu.Unlock()
			http.Error(w, "server is shutting down", http.StatusServiceUnavailable)
			return
		}
		if r.Method == http.MethodPost {
			h.calls.Add(1)
			defer h.calls.Done()
		}
		h.mu.Unlock()
		next.ServeHTTP(w, r)
	})
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
