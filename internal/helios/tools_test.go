package helios_test

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/internal/helios"
	"github.com/mcpkeep/mcpkeep/lifecycle"
	"github.com/mcpkeep/mcpkeep/statefile"
)

// hangAfter bounds the wait for a harness that does not stop; a failure
// detector, not a speed goal.
const hangAfter = 30 * time.Second

// serve runs helios on the harness in a fresh home, stdio on pipes, with
// the Options changed by change, and returns a client session and the home.
// The test's end stops it.
func serve(t *testing.T, change func(*lifecycle.Options)) (*mcp.ClientSession, string) {
	t.Helper()
	home := filepath.Join(t.TempDir(), "home")
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	opts := lifecycle.Options{
		Name: "helios", Version: helios.Version(), Home: home,
		Spec: helios.Spec(), NewServer: helios.NewServer, Validate: helios.Validate,
		NoRegistry: true, Stdin: inR, Stdout: outW, NoSignals: true,
	}
	change(&opts)
	h, err := lifecycle.New(opts)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- h.Run(t.Context()) }()
	t.Cleanup(func() {
		inW.Close()
		outR.Close()
		select {
		case err := <-done:
			assert.NoError(t, err)
		case <-time.After(hangAfter):
			t.Errorf("Run did not return within %v of stdin EOF", hangAfter)
		}
	})
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, nil)
	cs, err := client.Connect(t.Context(), &mcp.IOTransport{Reader: outR, Writer: inW}, nil)
	require.NoError(t, err)
	return cs, home
}

func callTool(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: name, Arguments: args})
	require.NoError(t, err, "a bad argument is a tool error, not a protocol error")
	return res
}

// call calls a tool that must succeed and decodes its structured result.
func call[T any](t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) T {
	t.Helper()
	res := callTool(t, cs, name, args)
	require.False(t, res.IsError, "%s(%v): %s", name, args, text(res))
	var out T
	b, err := json.Marshal(res.StructuredContent)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &out))
	return out
}

func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

type change struct {
	Commit string `json:"commit"`
	Detail string `json:"detail"`
}

type history struct {
	Commits []struct {
		Hash    string `json:"hash"`
		Message string `json:"message"`
	} `json:"commits"`
}

// TestBadArguments: every kind of bad argument gives a tool error that
// names what is wrong, and changes nothing.
func TestBadArguments(t *testing.T) {
	cs, _ := serve(t, func(*lifecycle.Options) {})
	before := call[history](t, cs, "history", nil)
	tests := []struct {
		tool string
		args map[string]any
		says []string
	}{
		{"update_preference", map[string]any{"value": "x"}, []string{"key"}},
		{"update_preference", map[string]any{"key": 5, "value": "x"}, []string{"key", "string"}},
		{"update_preference", map[string]any{"key": "tone", "value": "x", "colour": "red"}, []string{"colour"}},
		{"update_preference", map[string]any{"key": "bad key", "value": "x"}, []string{`"bad key"`}},
		{"update_preference", map[string]any{"key": "", "value": "x"}, []string{`key ""`}},
		{"update_preference", map[string]any{"key": "tone", "value": strings.Repeat("x", 4097)}, []string{"4097", "4096"}},
		{"update_preference", map[string]any{"persona": "Bad!", "key": "tone", "value": "x"}, []string{`"Bad!"`}},
		{"update_preference", map[string]any{"persona": "ghost", "key": "tone", "value": "x"}, []string{`"ghost"`, "concise, default"}},
		{"get_persona", map[string]any{"name": "../base"}, []string{`"../base"`}},
		{"get_persona", map[string]any{"name": "ghost"}, []string{`"ghost"`, "concise, default"}},
		{"set_active_persona", map[string]any{}, []string{"name"}},
		{"set_active_persona", map[string]any{"name": ""}, []string{"name is required"}},
		{"set_active_persona", map[string]any{"name": "ghost"}, []string{`"ghost"`}},
		{"history", map[string]any{"limit": -1}, []string{"limit -1"}},
		{"history", map[string]any{"path": "../../etc/passwd"}, []string{`"../../etc/passwd"`}},
		{"rollback", map[string]any{}, []string{"rev"}},
		{"rollback", map[string]any{"rev": ""}, []string{"rev is required"}},
		{"rollback", map[string]any{"rev": "nope"}, []string{`"nope"`}},
		{"rollback", map[string]any{"rev": "HEAD~99"}, []string{`"HEAD~99"`}},
	}
	for _, tt := range tests {
		b, _ := json.Marshal(tt.args)
		t.Run(tt.tool+string(b), func(t *testing.T) {
			res := callTool(t, cs, tt.tool, tt.args)
			require.True(t, res.IsError, "%s", text(res))
			for _, s := range tt.says {
				assert.Contains(t, text(res), s)
			}
		})
	}
	assert.Equal(t, before, call[history](t, cs, "history", nil), "no commit")
	p := call[helios.Persona](t, cs, "get_persona", nil)
	assert.Equal(t, map[string]string{"tone": "neutral", "verbosity": "normal"}, p.Preferences, "no change")
}

// TestTools walks the tools through a session: change, remove, switch
// persona, commit a hand edit, refuse an invalid one, look at history and
// roll back.
func TestTools(t *testing.T) {
	cs, home := serve(t, func(*lifecycle.Options) {})
	configDir := filepath.Join(home, "config")

	set := call[change](t, cs, "update_preference", map[string]any{"key": "tone", "value": "warm"})
	assert.NotEmpty(t, set.Commit)
	again := call[change](t, cs, "update_preference", map[string]any{"key": "tone", "value": "warm"})
	assert.Empty(t, again.Commit, "no change, no commit")
	call[change](t, cs, "update_preference", map[string]any{"key": "verbosity", "value": ""})
	p := call[helios.Persona](t, cs, "get_persona", map[string]any{"name": "default"})
	assert.Equal(t, map[string]string{"tone": "warm"}, p.Preferences)

	call[change](t, cs, "set_active_persona", map[string]any{"name": "concise"})
	cfg := call[struct {
		Base   helios.Base    `json:"base"`
		Active helios.Persona `json:"active"`
	}](t, cs, "get_config", nil)
	assert.Equal(t, "concise", cfg.Base.ActivePersona)
	assert.Equal(t, "concise", cfg.Active.Name)

	hand := filepath.Join(configDir, "personas", "terse.yaml")
	require.NoError(t, os.WriteFile(hand, []byte("name: terse\npreferences: {tone: dry}\n"), 0o600))
	committed := call[change](t, cs, "commit_changes", map[string]any{"message": "add terse"})
	assert.NotEmpty(t, committed.Commit)
	list := call[struct{ Personas []string }](t, cs, "list_personas", nil)
	assert.Equal(t, []string{"concise", "default", "terse"}, list.Personas)

	require.NoError(t, os.WriteFile(hand, []byte("name: someone-else\n"), 0o600))
	res := callTool(t, cs, "commit_changes", nil)
	assert.True(t, res.IsError)
	assert.Contains(t, text(res), "not committed")
	require.NoError(t, os.WriteFile(hand, []byte("name: terse\npreferences: {tone: dry}\n"), 0o600))

	h := call[history](t, cs, "history", map[string]any{"path": "personas/default.yaml", "limit": 2})
	require.Len(t, h.Commits, 2)
	assert.Equal(t, "update_preference default.verbosity", h.Commits[0].Message)
	back := call[change](t, cs, "rollback", map[string]any{"rev": h.Commits[1].Hash + "~1"})
	assert.NotEmpty(t, back.Commit)
	p = call[helios.Persona](t, cs, "get_persona", map[string]any{"name": "default"})
	assert.Equal(t, map[string]string{"tone": "neutral", "verbosity": "normal"}, p.Preferences, "as installed")
}

// TestServerInfoShowsHealth: server_info reports the state record with the
// health checks' result, and never the token.
func TestServerInfoShowsHealth(t *testing.T) {
	cs, home := serve(t, func(o *lifecycle.Options) {
		o.HealthInterval = 10 * time.Millisecond
		o.HTTP = "127.0.0.1:0" // for a token to keep out
	})
	type info struct {
		State    statefile.State `json:"state"`
		Boot     string          `json:"boot"`
		Boots    int             `json:"boots"`
		Recovery []string        `json:"recovery"`
	}
	var got info
	deadline := time.Now().Add(hangAfter)
	for got = call[info](t, cs, "server_info", nil); got.State.Health == nil; got = call[info](t, cs, "server_info", nil) {
		require.False(t, time.Now().After(deadline), "no health result in server_info after %v", hangAfter)
		time.Sleep(5 * time.Millisecond)
	}
	assert.True(t, got.State.Health.OK, "%v", got.State.Health.Problems)
	assert.Equal(t, os.Getpid(), got.State.PID)
	assert.Equal(t, home, got.State.Home)
	assert.Equal(t, "fresh", got.Boot)
	assert.Equal(t, 1, got.Boots)
	assert.Empty(t, got.State.Token)
	st, err := statefile.Read(filepath.Join(home, statefile.FileName))
	require.NoError(t, err)
	require.NotEmpty(t, st.Token)
	res := callTool(t, cs, "server_info", nil)
	assert.NotContains(t, text(res), st.Token)
}
