package lifecycle

import (
	"context"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpkeep/mcpkeep/statefile"
)

// stdioSession marks the context of the stdio session's requests: mcpserve
// connects that session with the context serve gives it, from which the
// go-sdk derives every request's; HTTP and attached sessions have others.
type stdioSession struct{}

// recordOwnClient is a receiving middleware that records the server's own
// client (statefile.State.Client) once it has initialized: the client on
// the process's stdio or, after a takeover, the one its forwarder serves
// through Listener.ServeOwn. A client initializes with its initialize
// request or, from protocol 2026-07-28 on, with its first request, whose
// _meta names it (the go-sdk then has the session's InitializeParams).
// Once the own client is recorded, a request costs it one atomic load. It
// writes nothing itself: publish writes the state file, after announce.
func (w *writer) recordOwnClient(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if !w.ownRecorded.Load() {
			w.recordIfOwn(ctx, req)
		}
		return res, err
	}
}

// recordIfOwn records the client of req's session if it is the server's
// own and has initialized.
func (w *writer) recordIfOwn(ctx context.Context, req mcp.Request) {
	ss, _ := req.GetSession().(*mcp.ServerSession)
	if ss == nil {
		return
	}
	since := time.Now()
	switch {
	case ctx.Value(stdioSession{}) != nil:
	case w.attached != nil && w.fwd != nil:
		s, ok := w.attached.Lookup(ss)
		if !ok || !s.Own {
			return
		}
		// The forwarder replays its client's initialize to each
		// writer: the client initialized when the first answered.
		if t := w.fwd.InitializedAt(); !t.IsZero() {
			since = t
		}
	default:
		return
	}
	p := ss.InitializeParams()
	if p == nil || w.ownRecorded.Swap(true) {
		return
	}
	c := &statefile.Client{Since: since.UTC().Truncate(time.Millisecond)}
	if p.ClientInfo != nil {
		c.Name, c.Version = p.ClientInfo.Name, p.ClientInfo.Version
	}
	w.mu.Lock()
	w.st.Client = c
	w.mu.Unlock()
	w.changed()
}
