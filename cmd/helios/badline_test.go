package main

import (
	"bufio"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/internal/mcptest"
)

// badLineLog is the log line of each bad line a server answered.
const badLineLog = `msg="stdio: answered a bad line from the client"`

// TestStdioBadLines: a bad line from the client is answered with a
// JSON-RPC error and the session goes on, for the writer's own client
// and for an attached helios's (a second launch on the home, which
// forwards to the writer); EOF after a bad line still stops helios
// cleanly. Before, the first bad line ended the session, and an attached
// helios exited 0 with nothing on stderr.
func TestStdioBadLines(t *testing.T) {
	for _, attached := range []bool{false, true} {
		name := "writer"
		if attached {
			name = "attached"
		}
		// launch starts the helios under test: the writer, or one
		// attached to a writer the test started first.
		launch := func(t *testing.T) *server {
			home, registry := filepath.Join(t.TempDir(), "home"), filepath.Join(t.TempDir(), "servers.json")
			if attached {
				w := start(t, home, registry)
				w.ready(t)
			}
			return start(t, home, registry)
		}
		t.Run(name+"/exchange", func(t *testing.T) {
			s := launch(t)
			_, err := io.WriteString(s.Stdin(), mcptest.Handshake)
			require.NoError(t, err)
			out := bufio.NewReader(s.Stdout())
			line, err := out.ReadString('\n')
			require.NoError(t, err, "stderr:\n%s", s.Stderr())
			require.Contains(t, line, `"id":0,"result"`)
			mcptest.ExchangeBadLines(t, s.Stdin(), out)
			require.NoError(t, s.Stdin().Close())
			require.NoError(t, s.exit(t, hangAfter), "stderr:\n%s", s.Stderr())
			assert.Equal(t, len(mcptest.BadLines), strings.Count(s.Stderr(), badLineLog), "stderr:\n%s", s.Stderr())
			if attached {
				assert.Contains(t, s.Stderr(), "attached to the home's writer")
			}
		})
		t.Run(name+"/burst then EOF", func(t *testing.T) {
			s := launch(t)
			_, err := io.WriteString(s.Stdin(), mcptest.BadLinesBurst())
			require.NoError(t, err)
			require.NoError(t, s.Stdin().Close())
			mcptest.CheckBadLinesBurst(t, s.Stdout(), nil)
			require.NoError(t, s.exit(t, hangAfter), "stderr:\n%s", s.Stderr())
			assert.Equal(t, len(mcptest.BadLines)+1, strings.Count(s.Stderr(), badLineLog), "stderr:\n%s", s.Stderr())
			assert.Contains(t, s.Stderr(), "fault=client")
		})
	}
}

// TestStdioLineTooLong: a line longer than 16 MiB (the go-sdk's
// DefaultMaxLineLength) is answered and skipped, and the next request
// answered.
func TestStdioLineTooLong(t *testing.T) {
	s := start(t, filepath.Join(t.TempDir(), "home"), filepath.Join(t.TempDir(), "servers.json"))
	out := bufio.NewReader(s.Stdout())
	_, err := io.WriteString(s.Stdin(), mcptest.Handshake)
	require.NoError(t, err)
	_, err = out.ReadString('\n')
	require.NoError(t, err, "stderr:\n%s", s.Stderr())
	go func() {
		// A write the server does not read fails when the test kills it.
		io.WriteString(s.Stdin(), `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"`+strings.Repeat("x", 16<<20)+`"}}`+"\n"+mcptest.Ping(2))
	}()
	line, err := out.ReadString('\n')
	require.NoError(t, err, "stderr:\n%s", s.Stderr())
	assert.JSONEq(t, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: a line of more than 16777216 bytes; it was skipped unread"}}`, line)
	line, err = out.ReadString('\n')
	require.NoError(t, err, "stderr:\n%s", s.Stderr())
	assert.JSONEq(t, `{"jsonrpc":"2.0","id":2,"result":{}}`, line)
	require.NoError(t, s.Stdin().Close())
	require.NoError(t, s.exit(t, hangAfter), "stderr:\n%s", s.Stderr())
}
