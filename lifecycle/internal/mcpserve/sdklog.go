package mcpserve

import (
	"context"
	"log/slog"
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
