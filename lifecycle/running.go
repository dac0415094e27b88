package lifecycle

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// runningCalls records the tool calls being handled, of every client, so
// that a shutdown that cannot wait for them (a tool that ignores its
// context) can name them in the log.
type runningCalls struct {
	mu    sync.Mutex
	next  uint64
	calls map[uint64]runningCall
}

type runningCall struct {
	tool  string
	since time.Time
}

func newRunningCalls() *runningCalls {
	return &runningCalls{calls: make(map[uint64]runningCall)}
}

// middleware records each tools/call while its handler runs.
func (r *runningCalls) middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		call, ok := req.(*mcp.CallToolRequest)
		if method != "tools/call" || !ok || call.Params == nil {
			return next(ctx, method, req)
		}
		r.mu.Lock()
		r.next++
		id := r.next
		r.calls[id] = runningCall{tool: call.Params.Name, since: time.Now()}
		r.mu.Unlock()
		defer func() {
			r.mu.Lock()
			delete(r.calls, id)
			r.mu.Unlock()
		}()
		return next(ctx, method, req)
	}
}

// logStuck logs each tool call still running, oldest first, and reports
// how many there were.
func (r *runningCalls) logStuck(log *slog.Logger, timeout time.Duration) int {
	r.mu.Lock()
	calls := make([]runningCall, 0, len(r.calls))
	for _, c := range r.calls {
		calls = append(calls, c)
	}
	r.mu.Unlock()
	slices.SortFunc(calls, func(a, b runningCall) int { return a.since.Compare(b.since) })
	for _, c := range calls {
		log.Warn("tool "+c.tool+" still running after ShutdownTimeout; exiting without it "+
			"(as after a crash: its change is all or nothing, the next start recovers, and every change acknowledged is committed)",
			"tool", c.tool, "running_for", time.Since(c.since).Round(time.Millisecond), "shutdown_timeout", timeout)
	}
	return len(calls)
}
