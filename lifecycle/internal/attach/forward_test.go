package attach_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/lifecycle/internal/attach"
)

// collector records what a client is sent.
type collector struct {
	mu      sync.Mutex
	logs    []string
	updated []string
	changed int
}

func (c *collector) options() *mcp.ClientOptions {
	return &mcp.ClientOptions{
		LoggingMessageHandler: func(_ context.Context, r *mcp.LoggingMessageRequest) {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.logs = append(c.logs, r.Params.Data.(string))
		},
		ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.updated = append(c.updated, r.Params.URI)
		},
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.changed++
		},
		ElicitationHandler: func(ctx context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "ada"}}, nil
		},
	}
}

// eventually polls cond until it holds or hangAfter passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(hangAfter)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s after %v", what, hangAfter)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestForward: through a forwarder, a client's calls reach the writer and
// the writer's notifications and requests reach the client: logging, a
// server-to-client request (elicitation), tools/list_changed. The client
// is one session on the writer, which knows its name.
func TestForward(t *testing.T) {
	for _, version := range []string{legacy, ""} { // "": the go-sdk's latest, 2026-07-28, without initialize
		t.Run("protocol="+version, func(t *testing.T) {
			path := attach.Path(t.TempDir())
			w := startWriter(t, path, newServer("writer", nil))
			var got collector
			a := attachClient(t, path, &clientOpts{client: got.options(), session: &mcp.ClientSessionOptions{ProtocolVersion: version}})

			assert.Equal(t, whoOut{Server: "writer", Client: "tester"}, who(t, a.cs))
			sessions := w.l.Sessions()
			require.Len(t, sessions, 1)
			assert.Equal(t, "tester", sessions[0].Client)
			assert.Equal(t, "v9", sessions[0].ClientVersion)

			mcp.AddTool(w.ts.Server, &mcp.Tool{Name: "new"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
				return nil, nil, nil
			})
			eventually(t, "tools/list_changed", func() bool { got.mu.Lock(); defer got.mu.Unlock(); return got.changed > 0 })

			if version == legacy { // later versions forbid server-initiated requests
				require.NoError(t, a.cs.SetLoggingLevel(t.Context(), &mcp.SetLoggingLevelParams{Level: "info"}))
				_, err := a.cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "log"})
				require.NoError(t, err)
				eventually(t, "log messages", func() bool { got.mu.Lock(); defer got.mu.Unlock(); return len(got.logs) == 2 })
				assert.Equal(t, []string{"info", "warning"}, got.logs)

				res, err := a.cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "elicit"})
				require.NoError(t, err)
				var out whoOut
				remarshal(t, res.StructuredContent, &out)
				assert.Equal(t, "ada", out.Client, "the elicitation went to the client and its answer back")
			}
		})
	}
}

// TestHandoverReplaysTheSession: when the writer hands over, the client's
// session is set up on the next writer as it was on the first, without the
// client seeing it: initialize and initialized (the writer knows the
// client), the logging level, the resource subscriptions. A client of
// 2026-07-28 sent no initialize, and none is made up for it.
func TestHandoverReplaysTheSession(t *testing.T) {
	for _, version := range []string{legacy, ""} {
		t.Run("protocol="+version, func(t *testing.T) {
			path := attach.Path(t.TempDir())
			first := startWriter(t, path, newServer("first", nil))
			var got collector
			a := attachClient(t, path, &clientOpts{client: got.options(), session: &mcp.ClientSessionOptions{ProtocolVersion: version}})
			assert.Equal(t, "first", who(t, a.cs).Server)
			if version == legacy {
				require.NoError(t, a.cs.SetLoggingLevel(t.Context(), &mcp.SetLoggingLevelParams{Level: "warning"}))
				require.NoError(t, a.cs.Subscribe(t.Context(), &mcp.SubscribeParams{URI: "test://r"}))
			}

			first.handover(t)
			second := startWriter(t, path, newServer("second", nil))
			assert.Equal(t, whoOut{Server: "second", Client: "tester"}, who(t, a.cs), "the second writer knows the client")
			assert.EqualValues(t, 2, a.attaches.Load())

			if version == legacy {
				assert.Equal(t, 1, second.ts.received("initialize"), "initialize replayed")
				assert.Equal(t, 1, second.ts.received("notifications/initialized"))
				_, err := a.cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "log"})
				require.NoError(t, err)
				require.NoError(t, second.ts.ResourceUpdated(t.Context(), &mcp.ResourceUpdatedNotificationParams{URI: "test://r"}))
				eventually(t, "the log and the update", func() bool {
					got.mu.Lock()
					defer got.mu.Unlock()
					return len(got.logs) > 0 && len(got.updated) > 0
				})
				assert.Equal(t, []string{"warning"}, got.logs, "the logging level was replayed")
				assert.Equal(t, []string{"test://r"}, got.updated, "the subscription was replayed")
			} else {
				assert.Zero(t, second.ts.received("initialize"), "no initialize made up for a 2026-07-28 client")
				assert.Equal(t, 1, second.ts.received("subscriptions/listen"), "its open subscriptions/listen sent again")
			}
			mcp.AddTool(second.ts.Server, &mcp.Tool{Name: "new"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
				return nil, nil, nil
			})
			eventually(t, "tools/list_changed from the second writer", func() bool { got.mu.Lock(); defer got.mu.Unlock(); return got.changed > 0 })
		})
	}
}

// TestCleanHandoverAnswersOrResends: a writer that hands over answers the
// call it was running; a call sent after it stopped reading goes to the
// next writer. Every call is answered once and ran once.
func TestCleanHandoverAnswersOrResends(t *testing.T) {
	path := attach.Path(t.TempDir())
	started := make(chan string, 10)
	first := startWriter(t, path, newServer("first", started))
	a := attachClient(t, path, nil)

	blocked := make(chan error, 1)
	go func() {
		_, err := a.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "block"})
		blocked <- err
	}()
	require.Equal(t, "block", <-started)

	shut := make(chan error, 1)
	go func() { shut <- first.stop() }()
	eventually(t, "the first writer to stop reading", first.l.Stopped)

	counted := make(chan whoOut, 1)
	go func() {
		res, err := a.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "count"})
		if assert.NoError(t, err) {
			var out whoOut
			remarshal(t, res.StructuredContent, &out)
			counted <- out
		}
	}()
	second := startWriter(t, path, newServer("second", nil))
	close(first.ts.release)
	require.NoError(t, <-blocked, "the call the first writer had read was answered")
	require.NoError(t, <-shut)

	out := <-counted
	assert.Equal(t, "second", out.Server, "the call sent after the first writer stopped reading went to the second")
	assert.EqualValues(t, 0, first.ts.counted.Load())
	assert.EqualValues(t, 1, second.ts.counted.Load())
}

// outcomeUnknown asserts err is the forwarder's outcome-unknown error.
func outcomeUnknown(t *testing.T, err error) {
	t.Helper()
	var werr *jsonrpc.Error
	require.ErrorAs(t, err, &werr)
	assert.EqualValues(t, attach.CodeOutcomeUnknown, werr.Code)
	assert.Contains(t, werr.Message, "may or may not have taken effect")
	assert.Contains(t, werr.Message, "the history tool")
}

// TestWriterGoneMidCall: a writer that goes without handing over leaves
// the calls it may have run answered with CodeOutcomeUnknown, never sent
// again, and the reads it was serving sent to the next writer. A request
// it made of the client is cancelled; the next writer's requests reach the
// client under ids that cannot be mistaken for the old ones.
func TestWriterGoneMidCall(t *testing.T) {
	path := attach.Path(t.TempDir())
	started := make(chan string, 10)
	first := startWriter(t, path, newServer("first", started))

	elicited := make(chan struct{}, 10)
	answer := make(chan struct{})
	cancelled := make(chan struct{}, 10)
	opts := &mcp.ClientOptions{ElicitationHandler: func(ctx context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		elicited <- struct{}{}
		select {
		case <-answer:
		case <-ctx.Done():
			cancelled <- struct{}{}
			return nil, ctx.Err()
		}
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "ada"}}, nil
	}}
	a := attachClient(t, path, &clientOpts{client: opts, session: &mcp.ClientSessionOptions{ProtocolVersion: legacy}, check: "the history tool"})

	errs := make(chan error, 3)
	reads := make(chan string, 1)
	go func() {
		_, err := a.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "block"})
		errs <- err
	}()
	go func() {
		_, err := a.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "elicit"})
		errs <- err
	}()
	go func() {
		res, err := a.cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "test://slow"})
		if assert.NoError(t, err) {
			reads <- res.Contents[0].Text
		}
	}()
	got := []string{<-started, <-started}
	slices.Sort(got)
	require.Equal(t, []string{"block", "slow"}, got)
	<-elicited

	first.crash(t)
	second := startWriter(t, path, newServer("second", started))
	outcomeUnknown(t, <-errs)
	outcomeUnknown(t, <-errs)
	<-cancelled
	assert.Equal(t, "slow", <-started, "the read was sent again")
	close(second.ts.release)
	assert.Equal(t, "second", <-reads)

	go func() {
		_, err := a.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "elicit"})
		errs <- err
	}()
	<-elicited
	close(answer)
	require.NoError(t, <-errs, "the second writer's elicitation was answered")
}

// TestClientGone: a client that goes away ends its forwarder at once and
// its session on the writer.
func TestClientGone(t *testing.T) {
	path := attach.Path(t.TempDir())
	w := startWriter(t, path, newServer("writer", nil))
	a := attachClient(t, path, nil)
	who(t, a.cs)
	require.Len(t, w.l.Sessions(), 1)
	require.NoError(t, a.cs.Close())
	select {
	case err := <-a.done:
		require.NoError(t, err)
		a.done <- nil
	case <-time.After(hangAfter):
		t.Fatal("the forwarder did not end")
	}
	eventually(t, "the session to end", func() bool { return len(w.l.Sessions()) == 0 })
	assert.True(t, a.f.Done())
	// A client that detaches is a normal end, not an error.
	eventually(t, "the end logged", func() bool { return strings.Contains(w.logs.String(), "attach: session ended") })
	assert.NotContains(t, w.logs.String(), "err=", "a clean detach is logged without an error")
}
