package inflight_test

import (
	"encoding/json"
	"io"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/internal/mcptest"
	"github.com/mcpkeep/mcpkeep/lifecycle/internal/inflight"
)

func id(t *testing.T, v float64) jsonrpc.ID {
	t.Helper()
	id, err := jsonrpc.MakeID(v)
	require.NoError(t, err)
	return id
}

func result(id jsonrpc.ID) *jsonrpc.Response {
	return &jsonrpc.Response{ID: id, Result: json.RawMessage(`{}`)}
}

// readAll reads c to its end.
func readAll(t *testing.T, c *inflight.Conn) []jsonrpc.Message {
	t.Helper()
	var got []jsonrpc.Message
	for {
		m, err := c.Read(t.Context())
		if err != nil {
			require.ErrorIs(t, err, io.EOF)
			return got
		}
		got = append(got, m)
	}
}

// inUse checks that m is the answer to a request reusing id.
func inUse(t *testing.T, id jsonrpc.ID, m jsonrpc.Message) {
	t.Helper()
	resp, ok := m.(*jsonrpc.Response)
	require.True(t, ok, "%T", m)
	assert.Equal(t, id, resp.ID)
	var rpcErr *jsonrpc.Error
	require.ErrorAs(t, resp.Error, &rpcErr)
	assert.EqualValues(t, jsonrpc.CodeInvalidRequest, rpcErr.Code)
}

// TestReusedCall: a request reusing the id of a call in progress is not
// read; each is answered after the call's answer, and the id is free
// again then.
func TestReusedCall(t *testing.T) {
	call := &jsonrpc.Request{ID: id(t, 1), Method: "tools/call"}
	again := &jsonrpc.Request{ID: id(t, 1), Method: "tools/list"}
	note := &jsonrpc.Request{Method: "notifications/initialized"}
	inner := &mcptest.Scripted{In: []jsonrpc.Message{call, again, note, again}}
	c := inflight.Wrap(inner)

	assert.Equal(t, []jsonrpc.Message{call, note}, readAll(t, c))
	assert.Empty(t, inner.Written, "nothing is answered before the call")

	answer := result(id(t, 1))
	require.NoError(t, c.Write(t.Context(), answer))
	require.Len(t, inner.Written, 3)
	assert.Same(t, answer, inner.Written[0], "the call's answer first")
	inUse(t, id(t, 1), inner.Written[1])
	inUse(t, id(t, 1), inner.Written[2])

	inner.In = []jsonrpc.Message{again}
	assert.Equal(t, []jsonrpc.Message{again}, readAll(t, c), "the id is free once answered")
}

// TestReusedStream: a request reusing the id of an open
// subscriptions/listen stream is answered at once.
func TestReusedStream(t *testing.T) {
	listen := &jsonrpc.Request{ID: id(t, 5), Method: "subscriptions/listen"}
	again := &jsonrpc.Request{ID: id(t, 5), Method: "tools/list"}
	other := &jsonrpc.Request{ID: id(t, 6), Method: "tools/list"}
	inner := &mcptest.Scripted{In: []jsonrpc.Message{listen, again, other}}
	c := inflight.Wrap(inner)

	assert.Equal(t, []jsonrpc.Message{listen, other}, readAll(t, c))
	require.Len(t, inner.Written, 1)
	inUse(t, id(t, 5), inner.Written[0])
	require.NoError(t, c.Write(t.Context(), result(id(t, 5))))
	assert.Len(t, inner.Written, 2, "the stream's answer, alone")
}

// TestDrop: a call that will get no answer frees its id, and a request
// that reused it is answered then.
func TestDrop(t *testing.T) {
	call := &jsonrpc.Request{ID: id(t, 2), Method: "tools/call"}
	inner := &mcptest.Scripted{In: []jsonrpc.Message{call, call}}
	c := inflight.Wrap(inner)
	assert.Equal(t, []jsonrpc.Message{call}, readAll(t, c))

	require.NoError(t, c.Drop(t.Context(), id(t, 2)))
	require.Len(t, inner.Written, 1)
	inUse(t, id(t, 2), inner.Written[0])
	inner.In = []jsonrpc.Message{call}
	assert.Equal(t, []jsonrpc.Message{call}, readAll(t, c), "the id is free")

	require.NoError(t, c.Drop(t.Context(), id(t, 9)), "an id not in use")
	assert.Len(t, inner.Written, 1)
}
