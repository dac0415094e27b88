package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/crashtest"
	"github.com/mcpkeep/mcpkeep/gitstore"
	"github.com/mcpkeep/mcpkeep/statefile"
)

// notesBin is the server, built once by TestMain.
var notesBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "notes-test-")
	if err == nil {
		notesBin, err = crashtest.Build(context.Background(), ".", dir)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// connect starts the server on home as an MCP client does, and returns
// the client's session; closing it closes the server's stdin, and the
// server stops.
func connect(t *testing.T, home string) (*mcp.ClientSession, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(notesBin)
	// MCPKEEP_REGISTRY= keeps the test off the user's discovery registry.
	cmd.Env = append(os.Environ(), "NOTES_HOME="+home, "MCPKEEP_REGISTRY=")
	stderr := new(bytes.Buffer)
	cmd.Stderr = stderr
	t.Cleanup(func() {
		if cmd.Process != nil {
			cmd.Process.Kill()
		}
	})
	client := mcp.NewClient(&mcp.Implementation{Name: "notes-test", Version: "v0"}, nil)
	cs, err := client.Connect(t.Context(), &mcp.CommandTransport{Command: cmd}, nil)
	require.NoError(t, err)
	return cs, stderr
}

// call calls a tool and decodes its structured result into a T, or
// returns the tool's error.
func call[T any](ctx context.Context, cs *mcp.ClientSession, tool string, args any) (T, error) {
	var out T
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		return out, err
	}
	if res.IsError {
		text := ""
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				text += tc.Text
			}
		}
		return out, fmt.Errorf("%s: %s", tool, text)
	}
	data, err := json.Marshal(res.StructuredContent)
	if err == nil {
		err = json.Unmarshal(data, &out)
	}
	return out, err
}

// TestNotes drives the server with a go-sdk client: the default note of a
// new home, a note added, one refused, and the notes still there, each a
// commit, after a restart.
func TestNotes(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	cs, stderr := connect(t, home)
	list, err := call[listed](t.Context(), cs, "list_notes", nil)
	require.NoError(t, err)
	require.Len(t, list.Notes, 1)
	assert.Equal(t, "welcome", list.Notes[0].Name, "a new home holds the default note")

	add, err := call[added](t.Context(), cs, "add_note", Note{Name: "groceries", Title: "Groceries", Text: "milk, bread"})
	require.NoError(t, err)
	assert.NotEmpty(t, add.Commit)
	_, err = call[added](t.Context(), cs, "add_note", Note{Name: "../escape", Text: "no"})
	assert.ErrorContains(t, err, `name "../escape"`, "a name that is not a plain file name is refused")
	require.NoError(t, cs.Close(), "a clean stop when the client goes; stderr:\n%s", stderr)

	// The home's layout: the notes in config/, a git repository; the
	// stamp; no state file once the server has stopped.
	assert.FileExists(t, filepath.Join(home, "config", "notes", "groceries.yaml"))
	assert.DirExists(t, filepath.Join(home, "config", ".git"))
	assert.FileExists(t, filepath.Join(home, ".version"))
	assert.NoFileExists(t, filepath.Join(home, statefile.FileName))
	store, err := gitstore.Open(filepath.Join(home, "config"), &gitstore.Options{ReadOnly: true})
	require.NoError(t, err)
	history, err := store.History("notes/groceries.yaml", 0)
	require.NoError(t, err)
	require.NoError(t, store.Close())
	require.Len(t, history, 1)
	assert.Equal(t, add.Commit, history[0].Hash)
	assert.Equal(t, "add note groceries", history[0].Message)
	assert.Equal(t, "notes", history[0].Author, "bootstrap.Spec.Git's author")

	cs, _ = connect(t, home)
	list, err = call[listed](t.Context(), cs, "list_notes", nil)
	require.NoError(t, err)
	assert.Equal(t, []Note{{Name: "groceries", Title: "Groceries", Text: "milk, bread"}, {Name: "welcome", Title: "Welcome",
		Text: "Notes keeps each note as a YAML file in a git repository under its home; every change is a commit."}}, list.Notes)
	require.NoError(t, cs.Close())
}

// TestClientClosesPipes: a client that sends a change and goes at once,
// closing its end of both pipes without reading the answer, costs nothing:
// the server does not die of SIGPIPE writing the answer, it stops
// cleanly, and the note is committed.
func TestClientClosesPipes(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	cmd := exec.Command(notesBin)
	cmd.Env = append(os.Environ(), "NOTES_HOME="+home, "MCPKEEP_REGISTRY=")
	stderr := new(bytes.Buffer)
	cmd.Stderr = stderr
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { cmd.Process.Kill() })

	send := func(msg string) {
		_, err := io.WriteString(stdin, msg+"\n")
		require.NoError(t, err)
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"v0"}}}`)
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err)
	require.Contains(t, line, `"id":1`)
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"add_note","arguments":{"name":"last","title":"Last","text":"sent as the client quit"}}}`)
	require.NoError(t, stdout.Close())
	require.NoError(t, stdin.Close())
	require.NoError(t, cmd.Wait(), "exit status 0, not killed by SIGPIPE; stderr:\n%s", stderr)

	store, err := gitstore.Open(filepath.Join(home, "config"), &gitstore.Options{ReadOnly: true})
	require.NoError(t, err)
	defer store.Close()
	data, err := store.ReadAt("HEAD", "notes/last.yaml")
	require.NoError(t, err, "the note is committed; stderr:\n%s", stderr)
	assert.Contains(t, string(data), "sent as the client quit")
}
