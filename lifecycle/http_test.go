package lifecycle_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/internal/mcptest"
	"github.com/mcpkeep/mcpkeep/lifecycle"
	"github.com/mcpkeep/mcpkeep/statefile"
)

// TestRunHTTPCounts: the state file, at each health check, and /healthz,
// live, count the HTTP sessions and connections; a 2026-07-28 client holds
// no session.
func TestRunHTTPCounts(t *testing.T) {
	opts := httpOptions(t)
	opts.HealthInterval = 10 * time.Millisecond
	r := run(t, opts)
	st := r.state(t)
	connect := func(version string) *mcp.ClientSession {
		client := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "v0"}, nil)
		cs, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: st.HTTP.URL,
			HTTPClient: &http.Client{Transport: mcptest.Bearer{Token: st.Token}}}, &mcp.ClientSessionOptions{ProtocolVersion: version})
		require.NoError(t, err)
		return cs
	}
	healthz := func() (sessions, connections int) {
		resp, err := http.Get(strings.TrimSuffix(st.HTTP.URL, "/mcp") + "/healthz")
		require.NoError(t, err)
		defer resp.Body.Close()
		var body struct {
			HTTP struct{ Sessions, Connections int }
		}
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
		return body.HTTP.Sessions, body.HTTP.Connections
	}

	old := connect("2025-06-18")
	current := connect("2026-07-28")
	assert.Equal(t, "2026-07-28", current.InitializeResult().ProtocolVersion)
	sessions, connections := healthz()
	assert.Equal(t, 1, sessions, "the 2025-06-18 client's session; the 2026-07-28 client holds none")
	assert.Positive(t, connections)
	r.poll(t, "the state file counting the session", func() bool {
		s, err := statefile.Read(r.statePath())
		return err == nil && s.HTTP.Sessions == 1 && s.HTTP.Connections > 0
	})

	require.NoError(t, old.Close()) // DELETE
	require.NoError(t, current.Close())
	sessions, _ = healthz()
	assert.Zero(t, sessions, "a deleted session is not counted")
	r.poll(t, "the state file counting no session", func() bool {
		s, err := statefile.Read(r.statePath())
		return err == nil && s.HTTP.Sessions == 0
	})
	require.NoError(t, r.stop(t))
}

// TestNewChecksHTTPMode: an HTTPMode out of range is an error from New.
func TestNewChecksHTTPMode(t *testing.T) {
	opts := httpOptions(t)
	opts.HTTPMode = lifecycle.HTTPModeStateless + 1
	_, err := lifecycle.New(opts)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "Options.HTTPMode")
}

// TestSDKLogger: the go-sdk's Info lines are logged at Debug, a client's
// mistake at Info; warnings and the server's errors keep their level.
func TestSDKLogger(t *testing.T) {
	var buf bytes.Buffer
	log := lifecycle.SDKLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})))
	log.Info("server session connected", "session_id", "x")
	assert.Empty(t, buf.String(), "Info is Debug now, below the handler's level")
	log.With("a", 1).Warn("trouble")
	assert.Contains(t, buf.String(), "level=WARN msg=trouble a=1")

	buf.Reset()
	debug := lifecycle.SDKLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	debug.Info("session initialized")
	assert.Contains(t, buf.String(), "level=DEBUG")
	assert.NotNil(t, lifecycle.SDKLogger(nil), "nil discards")

	// A client's mistake is not the server's error.
	buf.Reset()
	log.Error("duplicate initialized notification")
	assert.Contains(t, buf.String(), `level=INFO msg="duplicate initialized notification" fault=client`)
	buf.Reset()
	log.Error("server connect failed", "error", "boom")
	assert.Contains(t, buf.String(), `level=ERROR msg="server connect failed"`, "a server error stays an Error")
	buf.Reset()
	quiet := lifecycle.SDKLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn})))
	quiet.Error("method invalid during initialization", "method", "tools/list")
	assert.Empty(t, buf.String(), "Info is below the handler's level")
}

// TestProtocolVersion: a tool sees the version its client speaks, over
// stdio and HTTP, for clients of the current protocol and of older ones.
func TestProtocolVersion(t *testing.T) {
	server := mcp.NewServer(&mcp.Implementation{Name: "v", Version: "v0"}, nil)
	type out struct {
		Version string `json:"version"`
	}
	mcp.AddTool(server, &mcp.Tool{Name: "version"}, func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, out, error) {
		return nil, out{lifecycle.ProtocolVersion(req)}, nil
	})
	for _, asked := range []string{"2026-07-28", "2025-11-25", "2025-06-18", "2024-11-05", "1999-01-01"} {
		t.Run(asked, func(t *testing.T) {
			ct, st := mcp.NewInMemoryTransports()
			ss, err := server.Connect(t.Context(), st, nil)
			require.NoError(t, err)
			defer ss.Close()
			client := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "v0"}, nil)
			cs, err := client.Connect(t.Context(), ct, &mcp.ClientSessionOptions{ProtocolVersion: asked})
			require.NoError(t, err)
			defer cs.Close()
			res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "version"})
			require.NoError(t, err)
			negotiated := cs.InitializeResult().ProtocolVersion
			assert.Equal(t, map[string]any{"version": negotiated}, res.StructuredContent)
			if asked == "1999-01-01" {
				assert.Equal(t, "2025-11-25", negotiated, "an unknown version is answered with the newest with initialize")
			} else {
				assert.Equal(t, asked, negotiated)
			}
		})
	}
}
