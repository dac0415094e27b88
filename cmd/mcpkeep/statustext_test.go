package main

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/statefile"
)

// TestStatusTextWords: status counts in words that agree with the number
// (1 session, 2 sessions), and has a line for the server's own client only
// when it serves stdio, the only transport a client of its own uses.
func TestStatusTextWords(t *testing.T) {
	checked := time.Date(2026, 11, 25, 1, 2, 3, 0, time.UTC)
	for _, tc := range []struct {
		name                  string
		stdio                 bool
		sessions, connections int
		want                  []string
	}{
		{"one each", true, 1, 1, []string{"; 1 boot, last ", " (1 session, 1 connection as of the last health check, ", "client:    stdio, not named yet\n", "attached:  none\n"}},
		{"two each", true, 2, 2, []string{"; 2 boots, last ", " (2 sessions, 2 connections as of ", "client:    stdio, not named yet\n", "attached:  none\n"}},
		{"none", true, 0, 0, []string{" (0 sessions, 0 connections as of "}},
		{"no stdio", false, 1, 2, []string{" (1 session, 2 connections as of ", "attached:  none\n"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, c := tc.sessions, tc.connections
			text := statusText(statusOut{Home: "/h", State: "ready", Installed: true, Boots: tc.sessions, Server: &serverOut{
				Name: "helios", PID: 1, Alive: true, Status: statefile.StatusReady, Stdio: tc.stdio,
				URL: "http://127.0.0.1:1/mcp", Socket: "/h/mcp.sock", recordOut: recordOut{HTTPSessions: &s, HTTPConnections: &c,
					Health: &statefile.Health{OK: true, CheckedAt: checked}}}})
			for _, w := range tc.want {
				assert.Contains(t, text, w)
			}
			assert.Equal(t, tc.stdio, strings.Contains(text, "\nclient:    "), text)
		})
	}
}

// TestStatusTextClient: status names the server's own client, when the
// state file does, beside the attached ones; a state file of a build that
// does not record it reads as a client not named yet.
func TestStatusTextClient(t *testing.T) {
	since := time.Date(2026, 11, 25, 10, 42, 1, 0, time.UTC)
	for _, tc := range []struct {
		name   string
		client *statefile.Client
		want   string
	}{
		{"named", &statefile.Client{Name: "claude-code", Version: "1.2.3", Since: since},
			"client:    claude-code 1.2.3 (stdio, since " + since.Local().Format(time.DateTime) + ")\n"},
		{"no version", &statefile.Client{Name: "zed", Since: since}, "client:    zed (stdio, since "},
		{"no name", &statefile.Client{Since: since}, "client:    (not named) (stdio, since "},
		{"old state file", nil, "client:    stdio, not named yet\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, err := statefile.New("helios", "/h") // this test process: a running server
			require.NoError(t, err)
			st.Stdio, st.Socket, st.Status, st.Client = true, "/h/mcp.sock", statefile.StatusReady, tc.client
			st.Sessions = []statefile.Session{{PID: 2, Client: "cursor", ClientVersion: "0.9", Since: since}}
			text := statusText(statusOut{Home: "/h", State: "ready", Server: toServer(&st)})
			assert.Contains(t, text, tc.want)
			assert.Contains(t, text, "attached:  pid 2, cursor 0.9, since ")
			assert.Less(t, strings.Index(text, "client:"), strings.Index(text, "attached:"), text)
		})
	}
}

// TestStatusJSONHelp: status --help says when the JSON's HTTP counts were
// taken, since they sit beside no time of their own.
func TestStatusJSONHelp(t *testing.T) {
	r := mcpkeep(t, "status", "--help")
	assert.Equal(t, exitOK, r.code, r.stderr)
	assert.Contains(t, r.stderr, "server.http_sessions and server.http_connections are as of server.health.checked_at")
}
