package lifecycle

import (
	"log/slog"
	"reflect"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpkeep/mcpkeep/lifecycle/internal/mcpserve"
)

// Defaults for HTTPLimits fields left zero.
const (
	DefaultHTTPSessionIdleTimeout = mcpserve.DefaultSessionIdleTimeout // 30 minutes
	DefaultHTTPMaxSessions        = mcpserve.DefaultMaxSessions        // 1000
	DefaultHTTPReadHeaderTimeout  = mcpserve.DefaultReadHeaderTimeout  // 5 seconds
	DefaultHTTPIdleTimeout        = mcpserve.DefaultIdleTimeout        // 60 seconds
	DefaultHTTPBodyReadTimeout    = mcpserve.DefaultBodyReadTimeout    // 30 seconds
	DefaultHTTPMaxConnections     = mcpserve.DefaultMaxConnections     // 512
	DefaultHTTPMaxBodyBytes       = mcpserve.DefaultMaxBodyBytes       // 4 MiB
	DefaultHTTPMaxBatch           = mcpserve.DefaultMaxBatch           // 100 messages
	DefaultHTTPMaxBatchReplyBytes = mcpserve.DefaultMaxBatchReplyBytes // 4 MiB
)

// HTTPLimits bound what Streamable HTTP clients can make the server hold, so
// that a careless or hostile client cannot exhaust its memory or file
// descriptors. A zero field takes its default (the Default* constants); a
// negative one switches that limit off. The event stream a session holds
// open with GET is cut by none of the timeouts.
type HTTPLimits struct {
	// SessionIdleTimeout closes a session that no request has used for this
	// long (a client that crashed or slept without its DELETE). Its client
	// gets 404 for the closed session and initializes again. A session with
	// a request or an event stream open is not idle. Default 30 minutes.
	SessionIdleTimeout time.Duration
	// MaxSessions caps live sessions. An initialize at the cap closes the
	// session idle longest; when every session is busy it is refused with
	// 503 and Retry-After. 2026-07-28 clients hold no session. Default 1000.
	MaxSessions int
	// ReadHeaderTimeout is how long a connection may take to send a
	// request's headers; a client sends them at once. Default 5 seconds.
	ReadHeaderTimeout time.Duration
	// IdleTimeout closes a keep-alive connection no request has used for
	// this long. Default 60 seconds.
	IdleTimeout time.Duration
	// BodyReadTimeout is how long a POST may take to send its body; the
	// answer then has no deadline. Default 30 seconds.
	BodyReadTimeout time.Duration
	// MaxConnections caps open connections. At the cap, the connection
	// quiet longest (no request in progress) is closed to make room; when
	// every one is busy, new ones wait to be accepted. Default 512.
	MaxConnections int
	// MaxBodyBytes caps a POST body; a larger one gets 413. Default 4 MiB.
	MaxBodyBytes int64
	// MaxBatch caps the messages of one JSON-RPC batch, which only sessions
	// of protocol 2025-03-26 and older may send; a larger batch is refused
	// with a JSON-RPC error. Later versions' batches are always refused,
	// before they are read. Default 100.
	MaxBatch int
	// MaxBatchReplyBytes caps the answer to one batch; the answers past it
	// are dropped. Default 4 MiB.
	MaxBatchReplyBytes int64
}

// HTTPMode says which kinds of MCP client the Streamable HTTP endpoint
// serves. The go-sdk serves the 2026-07-28 protocol only without sessions,
// and server-to-client requests (elicitation, sampling, roots asked by the
// server during a call) only with them; the harness serves both kinds on
// one endpoint by routing each request.
type HTTPMode int

const (
	// HTTPModeBoth, the default, serves both kinds on /mcp.
	// Initialize-era clients (2024-11-05 to 2025-11-25) get a session: an
	// Mcp-Session-Id, an event stream on GET, and the server's requests to
	// them. 2026-07-28 clients get stateless requests: server/discover,
	// per-request _meta, input-required results where a handler needs
	// input, and no session to expire.
	HTTPModeBoth HTTPMode = iota
	// HTTPModeSessions serves initialize-era clients alone: a 2026-07-28
	// request is answered with the versions served, and the client falls
	// back to initialize. For servers whose tools ask the client through
	// its session (ServerSession.Elicit, CreateMessage, ListRoots).
	HTTPModeSessions
	// HTTPModeStateless serves every request without a session:
	// initialize-era clients get no event stream and no requests from the
	// server. Nothing is held between requests.
	HTTPModeStateless
)

// SDKLogger returns a logger for mcp.ServerOptions.Logger that logs the
// go-sdk's per-session Info lines ("server session connected", "session
// initialized", ...) at Debug: with many HTTP clients they would flood the
// log. The transport logs one Info line a minute with the session counts
// instead. A client's protocol mistake, which the go-sdk logs as an Error
// ("duplicate initialized notification", ...), is logged at Info with
// fault=client. Other warnings and errors keep their level.
func SDKLogger(log *slog.Logger) *slog.Logger {
	if log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(mcpserve.SDKHandler(log.Handler()))
}

// ProtocolVersion returns the MCP protocol version a request's client
// speaks: the one the request carries in its _meta (2026-07-28 and
// later), or the one negotiated when its session was initialized. Pass a
// tool handler's request (*mcp.CallToolRequest) or any other server-side
// request. It returns "" for a request with neither.
func ProtocolVersion(req mcp.Request) string {
	if p := req.GetParams(); p != nil && !isNilPointer(p) {
		if v, ok := p.GetMeta()[mcp.MetaKeyProtocolVersion].(string); ok && v != "" {
			return v
		}
	}
	ss, ok := req.GetSession().(*mcp.ServerSession)
	if !ok || ss == nil {
		return ""
	}
	if ip := ss.InitializeParams(); ip != nil && ip.ProtocolVersion != "" {
		return mcpserve.Negotiated(ip.ProtocolVersion)
	}
	return ""
}

func isNilPointer(v any) bool {
	rv := reflect.ValueOf(v)
	return rv.Kind() == reflect.Pointer && rv.IsNil()
}
