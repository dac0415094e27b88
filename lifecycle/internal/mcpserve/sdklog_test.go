package mcpserve

import (
	"bytes"
	"log/slog"
	"net/http"
	"strings"
	"sync"
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

// TestRefusedNewProtocolLog: the log line for a 2026-07-28 request the
// handler with sessions refused names what the operator can change
// (--http-mode, Options.HTTPMode), not the go-sdk's own option; in
// ModeBoth, where only a client that sent a session ID with it is
// refused, it says that was the client's mistake.
func TestRefusedNewProtocolLog(t *testing.T) {
	tools := rpc(3, "tools/list", map[string]any{"_meta": map[string]any{
		mcp.MetaKeyProtocolVersion: "2026-07-28", "io.modelcontextprotocol/clientCapabilities": map[string]any{}}})
	for _, tt := range []struct {
		name    string
		mode    Mode
		session bool
		want    []string
	}{
		{"sessions", ModeSessions, false, []string{"level=INFO", "--http-mode both", "HTTPModeBoth"}},
		{"both, with a session", ModeBoth, true, []string{"level=INFO", "with an Mcp-Session-Id", "fault=client"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var buf syncBuffer
			s := serveHTTP(t, Options{Mode: tt.mode, Logger: slog.New(slog.NewTextHandler(&buf, nil))})
			c := &rawClient{url: s.url, token: "tok"}
			if tt.session {
				c = s.initialized(t, "2025-06-18")
			}
			c.version = "2026-07-28"
			req := c.request(t, tools)
			req.Header.Set("Mcp-Method", "tools/list")
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			resp.Body.Close()
			require.Equal(t, http.StatusBadRequest, resp.StatusCode)

			logged := buf.String()
			for _, w := range tt.want {
				assert.Contains(t, logged, w)
			}
			assert.NotContains(t, logged, "StreamableHTTPOptions")
		})
	}
}

// syncBuffer is a bytes.Buffer that goroutines may share.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
