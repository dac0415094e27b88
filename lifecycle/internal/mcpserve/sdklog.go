package mcpserve

import (
	"context"
	"log/slog"
	"strings"
)

// SDKHandler wraps h for the go-sdk's loggers (mcp.ServerOptions.Logger):
// it logs the go-sdk's per-session Info lines ("server session connected",
// "session initialized", ...) at Debug, since with many HTTP clients they
// would flood the log, and a client's protocol mistake, which the go-sdk
// logs as an Error ("duplicate initialized notification", "method invalid
// during initialization", ...), at Info with fault=client: the client is
// answered with an error, and the server has nothing to fix. The go-sdk
// names no session or client in these lines, and passes no context that
// would. Every other warning and error keeps its level.
func SDKHandler(h slog.Handler) slog.Handler { return sdkHandler{h} }

// clientMistakes are the messages the go-sdk logs at Error for what a
// client did wrong (go-sdk v1.8.0, mcp/server.go).
var clientMistakes = map[string]bool{
	"initialized before initialize":        true,
	"duplicate initialized notification":   true,
	"duplicate initialize request":         true,
	"method invalid during initialization": true,
	"method removed in the new protocol":   true,
}

type sdkHandler struct{ slog.Handler }

func (d sdkHandler) Enabled(ctx context.Context, l slog.Level) bool {
	if l == slog.LevelInfo {
		l = slog.LevelDebug
	}
	return d.Handler.Enabled(ctx, l)
}

func (d sdkHandler) Handle(ctx context.Context, r slog.Record) error {
	switch {
	case r.Level == slog.LevelInfo:
		r.Level = slog.LevelDebug
	case r.Level == slog.LevelError && clientMistakes[r.Message]:
		r = r.Clone()
		r.Level = slog.LevelInfo
		r.AddAttrs(slog.String("fault", "client"))
		if !d.Handler.Enabled(ctx, r.Level) {
			return nil
		}
	}
	return d.Handler.Handle(ctx, r)
}

func (d sdkHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return sdkHandler{d.Handler.WithAttrs(attrs)}
}

func (d sdkHandler) WithGroup(name string) slog.Handler { return sdkHandler{d.Handler.WithGroup(name)} }

// transportHandler wraps h for the go-sdk's HTTP handlers
// (mcp.StreamableHTTPOptions.Logger): where the go-sdk tells of a
// 2026-07-28 request it refused in terms of its own options
// ("set StreamableHTTPOptions.Stateless = true"), which an operator
// cannot set, it logs what the operator or the client can change.
type transportHandler struct {
	slog.Handler
	mode Mode
}

// statelessHint is in the go-sdk's line for a 2026-07-28 request its
// handler with sessions refused (go-sdk v1.8.0, mcp/streamable.go).
const statelessHint = "StreamableHTTPOptions.Stateless"

func (t transportHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level == slog.LevelWarn && strings.Contains(r.Message, statelessHint) {
		r = slog.NewRecord(r.Time, slog.LevelInfo, "", r.PC)
		if t.mode == ModeSessions {
			r.Message = "HTTP: refused a 2026-07-28 request: this server serves initialize-era clients only " +
				"(helios --http-mode sessions, lifecycle.Options.HTTPMode HTTPModeSessions); the client may fall back to initialize. " +
				"To serve 2026-07-28 clients too, use --http-mode both (HTTPModeBoth, the default)"
		} else {
			r.Message = "HTTP: refused a 2026-07-28 request sent with an Mcp-Session-Id: 2026-07-28 requests belong to no session"
			r.AddAttrs(slog.String("fault", "client"))
		}
		if !t.Handler.Enabled(ctx, r.Level) {
			return nil
		}
	}
	return t.Handler.Handle(ctx, r)
}

func (t transportHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return transportHandler{t.Handler.WithAttrs(attrs), t.mode}
}

func (t transportHandler) WithGroup(name string) slog.Handler {
	return transportHandler{t.Handler.WithGroup(name), t.mode}
}
