// Package mcptest has helpers for tests that drive an MCP server, with the
// go-sdk client or with raw JSON-RPC lines on stdio. It is for tests only:
// the helpers fail the test they are given rather than return errors.
package mcptest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Initialize is an initialize request: one JSON-RPC message, id 0, with no
// newline, as the body of an HTTP POST or a stdio line.
const Initialize = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"test","version":"v0"}}}`

// ProtocolVersion is a protocol version a client may ask for at
// initialize, and whether a server is to know it.
type ProtocolVersion struct {
	Asked string // the version the client asks for
	Known bool   // a released version, which the server answers as asked
}

// ProtocolVersions are the versions a client may ask for at initialize:
// the released ones, and one the server cannot know. A server that knows
// the version answers with it; otherwise it answers with one it supports
// and the client decides whether to go on (MCP lifecycle, "Version
// Negotiation").
var ProtocolVersions = []ProtocolVersion{
	{"2024-11-05", true},
	{"2025-03-26", true},
	{"2025-06-18", true},
	{"2025-11-25", true},
	{"1999-01-01", false},
}

// CheckNegotiated checks result, the answer to an initialize that asked
// for v: v itself when the server is to know it, else a version the go-sdk
// supports. It returns the version answered.
func CheckNegotiated(t testing.TB, v ProtocolVersion, result json.RawMessage) string {
	t.Helper()
	var init struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	require.NoError(t, json.Unmarshal(result, &init), "%s", result)
	if v.Known {
		assert.Equal(t, v.Asked, init.ProtocolVersion, "a version the server supports is answered as asked")
	} else {
		assert.Contains(t, mcp.SupportedProtocolVersions(), init.ProtocolVersion, "an unknown version is answered with a supported one")
	}
	return init.ProtocolVersion
}

// Initialized is the notification a client sends once initialized.
const Initialized = `{"jsonrpc":"2.0","method":"notifications/initialized"}`

// Handshake is Initialize and Initialized as stdio lines, for a raw client
// that writes its requests without waiting for answers.
const Handshake = Initialize + "\n" + Initialized + "\n"

// ToolCall returns a tools/call request for tool with args as a stdio line.
func ToolCall(t testing.TB, id int, tool string, args any) string {
	t.Helper()
	b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": "tools/call",
		"params": map[string]any{"name": tool, "arguments": args}})
	require.NoError(t, err)
	return string(b) + "\n"
}

// Bearer is an http.RoundTripper that sends Authorization: Bearer Token on
// every request, through Base (http.DefaultTransport when nil).
type Bearer struct {
	Token string            // sent as is, after "Bearer "
	Base  http.RoundTripper // http.DefaultTransport when nil
}

// RoundTrip implements http.RoundTripper.
func (b Bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.Token)
	base := b.Base
	if base == nil {
		base = http.DefaultTransport
	}
	return base.RoundTrip(r)
}

// CallTool calls tool with args and returns its result, failing t on a
// protocol error; a tool error (IsError) is the caller's to check.
func CallTool(t testing.TB, cs *mcp.ClientSession, tool string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: tool, Arguments: args})
	require.NoError(t, err, "%s(%v)", tool, args)
	return res
}

// Call calls tool with args, fails t unless it succeeds, and decodes its
// structured result into a T.
func Call[T any](t testing.TB, cs *mcp.ClientSession, tool string, args map[string]any) T {
	t.Helper()
	res := CallTool(t, cs, tool, args)
	require.False(t, res.IsError, "%s(%v) failed: %s", tool, args, Text(res))
	var out T
	b, err := json.Marshal(res.StructuredContent)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &out), "%s(%v) returned %s", tool, args, b)
	return out
}

// Text joins the text content of res.
func Text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// Acked is one acknowledged call of UpdateAtOnce.
type Acked struct {
	Key    string // the key it set
	Value  string // to this value
	Commit string // the commit hash the tool answered with
}

// UpdateAtOnce makes n calls of tool on each of the named sessions, all in
// flight at once; the i-th call on session name sets the key name+i
// (name00, name01, ...) to the value v+i, with the arguments args(key,
// value). It fails t unless every call succeeds with a structured result
// naming its "commit", and returns the calls in order, session by session.
func UpdateAtOnce(t testing.TB, n int, tool string, args func(key, value string) any, sessions map[string]*mcp.ClientSession) []Acked {
	t.Helper()
	type call struct {
		Acked
		cs  *mcp.ClientSession
		res *mcp.CallToolResult
		err error
	}
	var calls []*call
	for _, name := range slices.Sorted(maps.Keys(sessions)) {
		for i := range n {
			calls = append(calls, &call{Acked: Acked{Key: fmt.Sprintf("%s%02d", name, i), Value: fmt.Sprintf("v%02d", i)},
				cs: sessions[name]})
		}
	}
	var wg sync.WaitGroup
	for _, c := range calls {
		wg.Go(func() {
			c.res, c.err = c.cs.CallTool(t.Context(), &mcp.CallToolParams{Name: tool, Arguments: args(c.Key, c.Value)})
		})
	}
	wg.Wait()
	acked := make([]Acked, 0, len(calls))
	for _, c := range calls {
		require.NoError(t, c.err, c.Key)
		require.False(t, c.res.IsError, "%s: %s", c.Key, Text(c.res))
		out, ok := c.res.StructuredContent.(map[string]any)
		require.True(t, ok, "%s: %v", c.Key, c.res.StructuredContent)
		c.Commit, _ = out["commit"].(string)
		require.NotEmpty(t, c.Commit, "%s is acknowledged with a commit", c.Key)
		acked = append(acked, c.Acked)
	}
	return acked
}

// Buffer is a bytes.Buffer that one goroutine may write while others read
// it: a process's stderr copied by exec, or a logger's output, that a test
// polls. The zero value is empty and ready.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
