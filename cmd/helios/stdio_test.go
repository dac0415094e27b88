package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/atomicfile"
	"github.com/mcpkeep/mcpkeep/cmd/internal/helios"
	"github.com/mcpkeep/mcpkeep/gitstore"
	"github.com/mcpkeep/mcpkeep/internal/mcptest"
	"github.com/mcpkeep/mcpkeep/statefile"
)

var toolNames = []string{"commit_changes", "get_config", "get_persona", "history", "list_personas",
	"rollback", "server_info", "set_active_persona", "update_preference"}

// useTools lists the tools, updates a preference and reads it back.
func useTools(t *testing.T, cs *mcp.ClientSession) {
	t.Helper()
	list, err := cs.ListTools(t.Context(), nil)
	require.NoError(t, err)
	var names []string
	for _, tool := range list.Tools {
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	assert.Equal(t, toolNames, names)

	changed := mcptest.Call[struct{ Commit string }](t, cs, "update_preference", map[string]any{"key": "tone", "value": "warm"})
	assert.NotEmpty(t, changed.Commit)
	p := mcptest.Call[helios.Persona](t, cs, "get_persona", nil)
	assert.Equal(t, "default", p.Name)
	assert.Equal(t, "warm", p.Preferences["tone"])
}

// TestStdioClient drives helios as an MCP client launches it: the go-sdk
// CommandTransport spawns it, and closing the session closes its stdin.
func TestStdioClient(t *testing.T) {
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
	cs, err := client.Connect(t.Context(), &mcp.CommandTransport{Command: cmd}, nil)
	require.NoError(t, err)
	useTools(t, cs)
	require.NoError(t, cs.Close(), "helios did not exit cleanly at stdin EOF; stderr:\n%s", &stderr)

	var p helios.Persona
	require.NoError(t, atomicfile.ReadYAMLStrict(filepath.Join(home, "config", "personas", "default.yaml"), &p))
	assert.Equal(t, "warm", p.Preferences["tone"], "the value is on disk after exit")
	assert.True(t, stateGone(t, home), "the state file is removed at exit")
}

// lenient is a writer that never fails: a tee to a reader that may stop
// reading.
type lenient struct{ io.Writer }

func (w lenient) Write(p []byte) (int, error) {
	w.Writer.Write(p)
	return len(p), nil
}

// teeStdio connects a client to s over its stdin and stdout. Every byte s
// writes to stdout also goes to a copy, whose lines the returned func
// gives once s has closed stdout (it fails t after hangAfter).
func teeStdio(t *testing.T, s *server) (*mcp.ClientSession, func() []string) {
	t.Helper()
	var raw bytes.Buffer
	toClient, tee := io.Pipe()
	copied := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.MultiWriter(&raw, lenient{tee}), s.Stdout())
		tee.Close()
		copied <- err
	}()
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, nil)
	cs, err := client.Connect(t.Context(), &mcp.IOTransport{Reader: toClient, Writer: s.Stdin()}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { cs.Close() })
	return cs, func() []string {
		t.Helper()
		select {
		case err := <-copied:
			require.NoError(t, err)
		case <-time.After(hangAfter):
			t.Fatalf("stdout still open after %v; stderr:\n%s", hangAfter, s.Stderr())
		}
		return strings.Split(strings.TrimSuffix(raw.String(), "\n"), "\n")
	}
}

// TestStdoutIsOnlyJSONRPC runs a session, tool errors and shutdown included,
// and checks every line helios wrote to stdout is a JSON-RPC message: logs
// and notices go to stderr.
func TestStdoutIsOnlyJSONRPC(t *testing.T) {
	s := start(t, filepath.Join(t.TempDir(), "home"), filepath.Join(t.TempDir(), "servers.json"))
	cs, stdout := teeStdio(t, s)
	useTools(t, cs)
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "get_persona", Arguments: map[string]any{"name": "nobody"}})
	require.NoError(t, err)
	assert.True(t, res.IsError)
	mcptest.Call[map[string]any](t, cs, "server_info", nil)
	require.NoError(t, cs.Close()) // closes helios's stdin
	// Everything helios wrote, up to EOF, before Wait closes the pipe.
	lines := stdout()
	require.NoError(t, s.exit(t, hangAfter))

	require.GreaterOrEqual(t, len(lines), 6, "one line per response at least")
	for _, line := range lines {
		jsonRPC(t, []byte(line))
	}
	assert.NotEmpty(t, s.Stderr(), "logs go to stderr")
}

// TestStdioBurstThenEOF is go-sdk #1061 end to end: 20 calls written in one
// burst and stdin closed at once still get 20 answers, and all 20 changes
// are on disk and committed.
func TestStdioBurstThenEOF(t *testing.T) {
	const n = 20
	home := filepath.Join(t.TempDir(), "home")
	s := start(t, home, filepath.Join(t.TempDir(), "servers.json"))
	var burst strings.Builder
	burst.WriteString(mcptest.Handshake)
	for i := 1; i <= n; i++ {
		burst.WriteString(mcptest.ToolCall(t, i, "update_preference", map[string]string{"key": fmt.Sprintf("k%02d", i), "value": fmt.Sprintf("v%02d", i)}))
	}
	_, err := io.WriteString(s.Stdin(), burst.String())
	require.NoError(t, err)
	require.NoError(t, s.Stdin().Close())

	answered := map[int]bool{}
	sc := bufio.NewScanner(s.Stdout())
	for sc.Scan() {
		jsonRPC(t, sc.Bytes())
		var resp struct {
			ID     int `json:"id"`
			Result *struct {
				IsError bool `json:"isError"`
			} `json:"result"`
		}
		require.NoError(t, json.Unmarshal(sc.Bytes(), &resp))
		if resp.ID > 0 && assert.NotNil(t, resp.Result, "call %d: %s", resp.ID, sc.Text()) {
			assert.False(t, resp.Result.IsError, "call %d: %s", resp.ID, sc.Text())
			answered[resp.ID] = true
		}
	}
	require.NoError(t, sc.Err())
	require.NoError(t, s.exit(t, hangAfter))
	assert.Len(t, answered, n, "answers")

	var p helios.Persona
	require.NoError(t, atomicfile.ReadYAMLStrict(filepath.Join(home, "config", "personas", "default.yaml"), &p))
	for i := 1; i <= n; i++ {
		assert.Equal(t, fmt.Sprintf("v%02d", i), p.Preferences[fmt.Sprintf("k%02d", i)], "value %d on disk", i)
	}
	store, err := gitstore.Open(filepath.Join(home, "config"), &gitstore.Options{ReadOnly: true})
	require.NoError(t, err)
	defer store.Close()
	commits, err := store.History("personas/default.yaml", 0)
	require.NoError(t, err)
	updates := 0
	for _, c := range commits {
		if strings.HasPrefix(c.Message, "update_preference default.k") {
			updates++
		}
	}
	assert.Equal(t, n, updates, "commits")
	dirty, err := store.Dirty()
	require.NoError(t, err)
	assert.False(t, dirty)
}

func TestVersion(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	cmd := exec.Command(heliosBin, "--version", "--home", home)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run())
	assert.Regexp(t, `^helios \S+( \(.+\))?\n$`, stdout.String())
	assert.Empty(t, stderr.String())
	assert.NoDirExists(t, home, "--version touches no home")
}

// TestNoTerminalNotice: the notice for a person at a terminal is not
// printed when stdin is /dev/null, a character device but no terminal.
func TestNoTerminalNotice(t *testing.T) {
	devNull, err := os.Open(os.DevNull)
	require.NoError(t, err)
	defer devNull.Close()
	cmd := exec.Command(heliosBin, "--home", filepath.Join(t.TempDir(), "home"), "--registry", filepath.Join(t.TempDir(), "servers.json"))
	var stderr bytes.Buffer
	cmd.Stdin, cmd.Stderr = devNull, &stderr
	require.NoError(t, cmd.Run(), "stdin at EOF: a clean stop")
	assert.NotContains(t, stderr.String(), "launch it from an MCP client")
	assert.Contains(t, stderr.String(), "stdin closed", "it did run")
}

// TestSignalStopsCleanly: SIGTERM (a service manager) and SIGINT (Ctrl-C)
// stop helios with exit status 0; every change it answered is on disk and
// committed, and it removed its state file and registry entry.
func TestSignalStopsCleanly(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			home := filepath.Join(t.TempDir(), "home")
			registry := filepath.Join(t.TempDir(), "servers.json")
			s := start(t, home, registry)
			client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, nil)
			cs, err := client.Connect(t.Context(), &mcp.IOTransport{Reader: s.Stdout(), Writer: s.Stdin()}, nil)
			require.NoError(t, err)
			t.Cleanup(func() { cs.Close() })
			s.ready(t)
			for _, v := range []string{"a", "b", "c"} {
				mcptest.Call[struct{ Commit string }](t, cs, "update_preference", map[string]any{"key": "k" + v, "value": v})
			}

			require.NoError(t, syscall.Kill(s.Pid(), sig))
			require.NoError(t, s.exit(t, hangAfter), "exit status 0")
			assert.True(t, stateGone(t, home), "state file removed")
			entries, err := statefile.NewRegistry(registry).List()
			require.NoError(t, err)
			assert.Empty(t, entries, "unregistered")

			var p helios.Persona
			require.NoError(t, atomicfile.ReadYAMLStrict(filepath.Join(home, "config", "personas", "default.yaml"), &p))
			store, err := gitstore.Open(filepath.Join(home, "config"), &gitstore.Options{ReadOnly: true})
			require.NoError(t, err)
			defer store.Close()
			dirty, err := store.Dirty()
			require.NoError(t, err)
			assert.False(t, dirty, "everything committed")
			committed, err := store.ReadAt("HEAD", "personas/default.yaml")
			require.NoError(t, err)
			for _, v := range []string{"a", "b", "c"} {
				assert.Equal(t, v, p.Preferences["k"+v], "answered change %s on disk", v)
				assert.Contains(t, string(committed), "k"+v+": "+v, "and committed")
			}
		})
	}
}

// TestInitializeProtocolVersions: over stdio, helios initializes a client
// of an older protocol version, answering with that version, and one of a
// version it does not know, answering with one it supports (MCP version
// negotiation); tools/list works after either. A seed project failed with
// clients of another version than its own.
func TestInitializeProtocolVersions(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	registry := filepath.Join(t.TempDir(), "servers.json")
	for _, tt := range mcptest.ProtocolVersions {
		t.Run(tt.Asked, func(t *testing.T) {
			s := start(t, home, registry)
			// A helios that never answers fails the read, not the package.
			hung := time.AfterFunc(hangAfter, func() { s.Kill() })
			defer hung.Stop()
			out := bufio.NewScanner(s.Stdout())
			read := func() (id int, result json.RawMessage) {
				t.Helper()
				require.True(t, out.Scan(), "no answer on stdout (%v); stderr:\n%s", out.Err(), s.Stderr())
				jsonRPC(t, out.Bytes())
				var resp struct {
					ID     int             `json:"id"`
					Result json.RawMessage `json:"result"`
				}
				require.NoError(t, json.Unmarshal(out.Bytes(), &resp))
				require.NotNil(t, resp.Result, "%s", out.Bytes())
				return resp.ID, resp.Result
			}
			write := func(msg map[string]any) {
				t.Helper()
				msg["jsonrpc"] = "2.0"
				b, err := json.Marshal(msg)
				require.NoError(t, err)
				_, err = s.Stdin().Write(append(b, '\n'))
				require.NoError(t, err)
			}

			write(map[string]any{"id": 0, "method": "initialize", "params": map[string]any{"protocolVersion": tt.Asked,
				"capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "test", "version": "v0"}}})
			_, result := read()
			mcptest.CheckNegotiated(t, tt, result)
			write(map[string]any{"method": "notifications/initialized"})
			write(map[string]any{"id": 1, "method": "tools/list", "params": map[string]any{}})
			id, result := read()
			assert.Equal(t, 1, id)
			var list struct {
				Tools []struct{ Name string } `json:"tools"`
			}
			require.NoError(t, json.Unmarshal(result, &list), "%s", result)
			var names []string
			for _, tool := range list.Tools {
				names = append(names, tool.Name)
			}
			slices.Sort(names)
			assert.Equal(t, toolNames, names)

			require.NoError(t, s.Stdin().Close())
			for out.Scan() {
				jsonRPC(t, out.Bytes())
			}
			require.NoError(t, s.exit(t, hangAfter), "a clean stop at stdin EOF; stderr:\n%s", s.Stderr())
		})
	}
}
