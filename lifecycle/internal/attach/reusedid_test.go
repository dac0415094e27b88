//go:build unix

package attach_test

import (
	"context"
	"errors"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/internal/mcptest"
	"github.com/mcpkeep/mcpkeep/lifecycle/internal/attach"
)

// rawClient is a client that writes JSON-RPC messages as they are, ids
// and all, which a go-sdk client never lets a test do.
type rawClient struct {
	t *testing.T
	c mcp.Connection
}

func (r rawClient) send(line string) {
	r.t.Helper()
	msg, err := jsonrpc.DecodeMessage([]byte(line))
	require.NoError(r.t, err)
	require.NoError(r.t, r.c.Write(r.t.Context(), msg))
}

// next returns the next message the client reads, which must be a
// response.
func (r rawClient) next(what string) *jsonrpc.Response {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(r.t.Context(), hangAfter)
	defer cancel()
	msg, err := r.c.Read(ctx)
	require.NoError(r.t, err, "waiting for %s", what)
	resp, ok := msg.(*jsonrpc.Response)
	require.True(r.t, ok, "waiting for %s, read %#v", what, msg)
	return resp
}

func idOf(t *testing.T, v float64) jsonrpc.ID {
	id, err := jsonrpc.MakeID(v)
	require.NoError(t, err)
	return id
}

// initialize sets c's session up.
func (r rawClient) initialize() {
	r.t.Helper()
	r.send(mcptest.Initialize)
	init := r.next("initialize's answer")
	require.Nil(r.t, init.Error, "%v", init.Error)
	r.send(mcptest.Initialized)
}

// reuseAnID drives c through a request sent again with its id while it is
// in progress: the second gets Invalid Request with that id, just after
// the first's answer, and the id works again afterwards. It releases ts's
// blocked calls.
func reuseAnID(t *testing.T, c rawClient, ts *testServer, started <-chan string) {
	c.send(mcptest.ToolCall(t, 1, "block", nil))
	require.Equal(t, "block", <-started)
	c.send(mcptest.ToolCall(t, 1, "count", nil)) // id 1 again
	c.send(`{"jsonrpc":"2.0","id":2,"method":"ping"}`)
	ping := c.next("the ping's answer") // the second id 1 was sent before
	assert.Equal(t, idOf(t, 2), ping.ID)
	assert.Nil(t, ping.Error)
	close(ts.release)

	first := c.next("call 1's answer")
	assert.Equal(t, idOf(t, 1), first.ID)
	assert.Nil(t, first.Error, "the first request with id 1 is answered as usual")
	again := c.next("the answer to the second request with id 1")
	assert.Equal(t, idOf(t, 1), again.ID)
	var rpcErr *jsonrpc.Error
	require.ErrorAs(t, again.Error, &rpcErr, "an error: %+v", again)
	assert.EqualValues(t, jsonrpc.CodeInvalidRequest, rpcErr.Code)
	assert.Contains(t, rpcErr.Message, "already in use")
	assert.Zero(t, ts.counted.Load(), "the second request with id 1 did not run")

	c.send(mcptest.ToolCall(t, 1, "count", nil))
	reused := c.next("the answer to id 1 used a third time")
	assert.Equal(t, idOf(t, 1), reused.ID)
	assert.Nil(t, reused.Error, "%v", reused.Error)
	assert.EqualValues(t, 1, ts.counted.Load())
}

// TestAttachedReusedID: a request an attached client sends with the id of
// one still in progress is answered by the writer (the go-sdk drops it).
func TestAttachedReusedID(t *testing.T) {
	path := attach.Path(t.TempDir())
	started := make(chan string, 10)
	ts := newServer("writer", started)
	startWriter(t, path, ts)
	conn, err := attach.Dial(t.Context(), path, attach.Hello{Name: "test"})
	require.NoError(t, err)
	c, err := (&mcp.IOTransport{Reader: conn, Writer: conn}).Connect(t.Context())
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })

	raw := rawClient{t, c}
	raw.initialize()
	reuseAnID(t, raw, ts, started)
}

// TestForwardedReusedID: the same through a Forwarder, whose client's
// request reusing an id reaches neither the forwarder's calls nor the
// writer; and a request that reused the id of a call the client then
// cancels is answered at once, as that call will not be.
func TestForwardedReusedID(t *testing.T) {
	path := attach.Path(t.TempDir())
	started := make(chan string, 10)
	ts := newServer("writer", started)
	startWriter(t, path, ts)
	ct, ft := mcp.NewInMemoryTransports()
	fc, err := ft.Connect(t.Context())
	require.NoError(t, err)
	f := attach.NewForwarder(fc, attach.ForwarderOptions{})
	conn, err := attach.Dial(t.Context(), path, attach.Hello{Name: "test"})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Attach(ctx, conn, conn.Writer.PID) }()
	c, err := ct.Connect(t.Context())
	require.NoError(t, err)
	t.Cleanup(func() {
		c.Close()
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("Attach: %v", err)
		}
		f.Close()
	})
	raw := rawClient{t, c}
	raw.initialize()

	raw.send(mcptest.ToolCall(t, 3, "block", nil))
	require.Equal(t, "block", <-started)
	raw.send(mcptest.ToolCall(t, 3, "count", nil)) // id 3 again
	raw.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3}}`)
	again := raw.next("the answer to the second request with id 3")
	assert.Equal(t, idOf(t, 3), again.ID)
	var rpcErr *jsonrpc.Error
	require.ErrorAs(t, again.Error, &rpcErr, "an error: %+v", again)
	assert.EqualValues(t, jsonrpc.CodeInvalidRequest, rpcErr.Code)
	raw.send(`{"jsonrpc":"2.0","id":4,"method":"ping"}`)
	ping := raw.next("the ping's answer")
	assert.Equal(t, idOf(t, 4), ping.ID, "nothing more for id 3: its call was cancelled")

	reuseAnID(t, raw, ts, started)
}
