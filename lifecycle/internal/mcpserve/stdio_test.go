package mcpserve

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/internal/mcptest"
)

// stdioLine is a message the server wrote to stdout, as a test reads it.
type stdioLine struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Result *struct {
		Structured echoOut `json:"structuredContent"`
	} `json:"result"`
	Error *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// TestStdioReusedID: a request sent with the id of a request still in
// progress gets an answer, Invalid Request with that id, just after the
// first request's; the go-sdk drops it unanswered (and the drain at EOF
// then waited for it). The id can be used again once its answer is read.
func TestStdioReusedID(t *testing.T) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	errc := make(chan error, 1)
	go func() {
		errc <- Serve(t.Context(), testServer(), Options{Stdio: true, Stdin: inR, Stdout: outW, ShutdownTimeout: failAfter})
		outW.Close()
	}()
	t.Cleanup(func() { inW.Close(); outR.Close() })
	lines := make(chan stdioLine)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(outR)
		for sc.Scan() {
			var l stdioLine
			if json.Unmarshal(sc.Bytes(), &l) != nil {
				l.Method = "not JSON-RPC: " + sc.Text()
			}
			lines <- l
		}
	}()
	send := func(msg string) {
		t.Helper()
		_, err := io.WriteString(inW, msg)
		require.NoError(t, err)
	}
	next := func(what string) stdioLine {
		t.Helper()
		select {
		case l, ok := <-lines:
			require.True(t, ok, "stdout ended before %s", what)
			return l
		case <-time.After(failAfter):
			require.FailNow(t, "no answer", "waiting for %s", what)
			return stdioLine{}
		}
	}
	pingClient := rpc(1, "tools/call", map[string]any{"name": "ping_client"})

	send(mcptest.Initialize + "\n")
	require.NotNil(t, next("initialize's answer").Result)
	send(mcptest.Initialized + "\n")
	// Call 1 waits for the client's answer to the server's ping: it is in
	// progress until the test answers.
	send(pingClient)
	ping := next("the server's ping")
	require.Equal(t, "ping", ping.Method)
	send(pingClient) // id 1 again
	echo2 := rpc(2, "tools/call", map[string]any{"name": "slow_echo", "arguments": echoIn{N: 2}})
	send(echo2)
	got := next("call 2's answer") // read after the second id 1: that one was read too
	assert.Equal(t, "2", string(got.ID))
	send(`{"jsonrpc":"2.0","id":` + string(ping.ID) + `,"result":{}}` + "\n")

	first := next("call 1's answer")
	assert.Equal(t, "1", string(first.ID))
	assert.Nil(t, first.Error, "the first request with id 1 is answered as usual")
	again := next("the answer to the second request with id 1")
	assert.Equal(t, "1", string(again.ID))
	require.NotNil(t, again.Error, "an error: %+v", again)
	assert.Equal(t, -32600, again.Error.Code)
	assert.Contains(t, again.Error.Message, "already in use")

	// The id is free again, and nothing is left to drain at EOF.
	echo3 := rpc(1, "tools/call", map[string]any{"name": "slow_echo", "arguments": echoIn{N: 3}})
	send(echo3)
	reused := next("the answer to id 1 used a third time")
	assert.Equal(t, "1", string(reused.ID))
	require.NotNil(t, reused.Result, "%+v", reused)
	assert.Equal(t, 3, reused.Result.Structured.N)
	require.NoError(t, inW.Close())
	select {
	case err := <-errc:
		require.ErrorIs(t, err, ErrStdinClosed)
	case <-time.After(failAfter):
		t.Fatal("Serve did not return after stdin EOF")
	}
	for l := range lines {
		t.Errorf("an answer more than asked for: %+v", l)
	}
}

type scriptedTransport struct{ c *mcptest.Scripted }

func (t scriptedTransport) Connect(context.Context) (mcp.Connection, error) { return t.c, nil }

// TestStdioReusedStreamID: a request with the id of an open
// subscriptions/listen stream, which is answered only when the session
// ends, is answered at once, and is not passed on.
func TestStdioReusedStreamID(t *testing.T) {
	id5, err := jsonrpc.MakeID(float64(5))
	require.NoError(t, err)
	id6, err := jsonrpc.MakeID(float64(6))
	require.NoError(t, err)
	listen := &jsonrpc.Request{ID: id5, Method: "subscriptions/listen"}
	again := &jsonrpc.Request{ID: id5, Method: "tools/list"}
	other := &jsonrpc.Request{ID: id6, Method: "tools/list"}
	inner := &mcptest.Scripted{In: []jsonrpc.Message{listen, again, other}}
	c, err := newDrainTransport(scriptedTransport{inner}, failAfter).Connect(t.Context())
	require.NoError(t, err)

	for _, want := range []*jsonrpc.Request{listen, other} {
		got, err := c.Read(t.Context())
		require.NoError(t, err)
		assert.Same(t, want, got)
	}
	require.Len(t, inner.Written, 1)
	resp, ok := inner.Written[0].(*jsonrpc.Response)
	require.True(t, ok, "%T", inner.Written[0])
	assert.Equal(t, id5, resp.ID)
	var rpcErr *jsonrpc.Error
	require.ErrorAs(t, resp.Error, &rpcErr)
	assert.EqualValues(t, jsonrpc.CodeInvalidRequest, rpcErr.Code)

	require.NoError(t, c.Write(t.Context(), &jsonrpc.Response{ID: id6, Result: json.RawMessage(`{}`)}))
	_, err = c.Read(t.Context())
	require.ErrorIs(t, err, io.EOF, "nothing left to drain: the stream is not waited for")
}
