// Package mcptest has helpers for tests that drive an MCP server, with the
// go-sdk client or with raw JSON-RPC lines on stdio. It is for tests only:
// the helpers fail the test they are given rather than return errors.
package mcptest

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"
)

// Initialize is an initialize request: one JSON-RPC message, id 0, with no
// newline, as the body of an HTTP POST or a stdio line.
const Initialize = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"test","version":"v0"}}}`

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
