package mcpserve

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSDKHandlerClientMistakes: each protocol mistake a client can make
// that the go-sdk logs as an Error is logged at Info with fault=client
// through SDKHandler, and nothing at Error: the go-sdk's messages are the
// ones SDKHandler knows.
func TestSDKHandlerClientMistakes(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(SDKHandler(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})))
	server := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "v0"}, &mcp.ServerOptions{Logger: logger})
	newProtocol := map[string]any{"_meta": map[string]any{
		mcp.MetaKeyProtocolVersion: "2026-07-28", "io.modelcontextprotocol/clientCapabilities": map[string]any{}}}
	in := `{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n" + // before initialize
		rpc(1, "tools/list", map[string]any{}) + // before initialize
		initialize + // initialize, initialized
		`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n" + // again
		rpc(5, "initialize", map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{},
			"clientInfo": map[string]any{"name": "t", "version": "0"}}) + // again
		rpc(2, "ping", newProtocol) // removed in 2026-07-28
	var out bytes.Buffer
	err := Serve(t.Context(), server, Options{Stdio: true, Stdin: strings.NewReader(in), Stdout: &out, ShutdownTimeout: time.Second})
	require.ErrorIs(t, err, ErrStdinClosed)

	logged := buf.String()
	for msg := range clientMistakes {
		assert.Contains(t, logged, `level=INFO msg="`+msg+`"`)
	}
	assert.Equal(t, len(clientMistakes), strings.Count(logged, "fault=client"), "%s", logged)
	assert.NotContains(t, logged, "level=ERROR")
}
