package main

import (
	"bytes"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/cmd/internal/helios"
	"github.com/mcpkeep/mcpkeep/internal/mcptest"
)

// TestProtocolVersions drives helios end to end with go-sdk clients of
// both protocol generations, over stdio and over HTTP: one that negotiates
// the current protocol, 2026-07-28 (server/discover, no initialize, no
// session), and one pinned to 2025-06-18 (initialize, a session). Each
// lists the tools, updates a preference and reads it back, and server_info
// names the version it speaks.
func TestProtocolVersions(t *testing.T) {
	for _, version := range []string{"2026-07-28", "2025-06-18"} {
		t.Run("stdio/"+version, func(t *testing.T) {
			home := filepath.Join(t.TempDir(), "home")
			cmd := exec.Command(heliosBin, "--home", home, "--registry", filepath.Join(t.TempDir(), "servers.json"))
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			t.Cleanup(func() {
				if cmd.Process != nil {
					cmd.Process.Kill()
				}
			})
			client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, nil)
			cs, err := client.Connect(t.Context(), &mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{ProtocolVersion: version})
			require.NoError(t, err, "stderr:\n%s", &stderr)
			speaks(t, cs, version)
			require.NoError(t, cs.Close(), "stderr:\n%s", &stderr)
		})
		t.Run("http/"+version, func(t *testing.T) {
			_, st := startHTTP(t, filepath.Join(t.TempDir(), "servers.json"))
			client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, nil)
			cs, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: st.HTTP.URL,
				HTTPClient: &http.Client{Transport: mcptest.Bearer{Token: st.Token}}}, &mcp.ClientSessionOptions{ProtocolVersion: version})
			require.NoError(t, err)
			defer cs.Close()
			speaks(t, cs, version)
			assert.Equal(t, version < "2026-07-28", cs.ID() != "", "a session for the initialize-era client alone")
		})
	}
}

// speaks checks that cs negotiated version and uses helios's tools with it.
func speaks(t *testing.T, cs *mcp.ClientSession, version string) {
	t.Helper()
	require.Equal(t, version, cs.InitializeResult().ProtocolVersion)
	list, err := cs.ListTools(t.Context(), nil)
	require.NoError(t, err)
	var names []string
	for _, tool := range list.Tools {
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	assert.Equal(t, toolNames, names)

	value := "warm-" + version
	changed := mcptest.Call[struct{ Commit string }](t, cs, "update_preference", map[string]any{"key": "tone", "value": value})
	assert.NotEmpty(t, changed.Commit)
	p := mcptest.Call[helios.Persona](t, cs, "get_persona", nil)
	assert.Equal(t, value, p.Preferences["tone"])

	info := mcptest.Call[struct{ Protocol string }](t, cs, "server_info", nil)
	assert.Equal(t, version, info.Protocol, "server_info names the negotiated version")
}
