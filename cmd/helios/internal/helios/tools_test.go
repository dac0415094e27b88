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

	"github.com/mcpkeep/mcpkeep/cmd/helios/internal/helios"
	"github.com/mcpkeep/mcpkeep/internal/mcptest"
	"github.com/mcpkeep/mcpkeep/lifecycle"
	"github.com/mcpkeep/mcpkeep/statefile"
)

// hangAfter bounds the wait for a harness that does not stop; a failure
// detector, not a speed goal.
const hangAfter = 30 * time.Second

// serve runs helios on the harness in a fresh home, stdio on pipes, with
// the Options changed by change, and returns a client session and the home.
// The test's end stops it.
func serve(t testing.TB, change func(*lifecycle.Options)) (*mcp.ClientSession, string) {
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
	before := mcptest.Call[history](t, cs, "history", nil)
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
			res := mcptest.CallTool(t, cs, tt.tool, tt.args)
			require.True(t, res.IsError, "%s", mcptest.Text(res))
			for _, s := range tt.says {
				assert.Contains(t, mcptest.Text(res), s)
			}
		})
	}
	assert.Equal(t, before, mcptest.Call[history](t, cs, "history", nil), "no commit")
	p := mcptest.Call[helios.Persona](t, cs, "get_persona", nil)
	assert.Equal(t, map[string]string{"tone": "neutral", "verbosity": "normal"}, p.Preferences, "no change")
}

// TestTools walks the tools through a session: change, remove, switch
// persona, commit a hand edit, refuse an invalid one, look at history and
// roll back.
func TestTools(t *testing.T) {
	cs, home := serve(t, func(*lifecycle.Options) {})
	configDir := filepath.Join(home, "config")

	set := mcptest.Call[change](t, cs, "update_preference", map[string]any{"key": "tone", "value": "warm"})
	assert.NotEmpty(t, set.Commit)
	again := mcptest.Call[change](t, cs, "update_preference", map[string]any{"key": "tone", "value": "warm"})
	assert.Empty(t, again.Commit, "no change, no commit")
	mcptest.Call[change](t, cs, "update_preference", map[string]any{"key": "verbosity", "value": ""})
	p := mcptest.Call[helios.Persona](t, cs, "get_persona", map[string]any{"name": "default"})
	assert.Equal(t, map[string]string{"tone": "warm"}, p.Preferences)

	mcptest.Call[change](t, cs, "set_active_persona", map[string]any{"name": "concise"})
	cfg := mcptest.Call[struct {
		Base   helios.Base    `json:"base"`
		Active helios.Persona `json:"active"`
	}](t, cs, "get_config", nil)
	assert.Equal(t, "concise", cfg.Base.ActivePersona)
	assert.Equal(t, "concise", cfg.Active.Name)

	hand := filepath.Join(configDir, "personas", "terse.yaml")
	require.NoError(t, os.WriteFile(hand, []byte("name: terse\npreferences: {tone: dry}\n"), 0o600))
	committed := mcptest.Call[change](t, cs, "commit_changes", map[string]any{"message": "add terse"})
	assert.NotEmpty(t, committed.Commit)
	list := mcptest.Call[struct{ Personas []string }](t, cs, "list_personas", nil)
	assert.Equal(t, []string{"concise", "default", "terse"}, list.Personas)

	require.NoError(t, os.WriteFile(hand, []byte("name: someone-else\n"), 0o600))
	res := mcptest.CallTool(t, cs, "commit_changes", nil)
	assert.True(t, res.IsError)
	assert.Contains(t, mcptest.Text(res), "not committed")
	require.NoError(t, os.WriteFile(hand, []byte("name: terse\npreferences: {tone: dry}\n"), 0o600))

	h := mcptest.Call[history](t, cs, "history", map[string]any{"path": "personas/default.yaml", "limit": 2})
	require.Len(t, h.Commits, 2)
	assert.Equal(t, "update_preference default.verbosity", h.Commits[0].Message)
	back := mcptest.Call[change](t, cs, "rollback", map[string]any{"rev": h.Commits[1].Hash + "~1"})
	assert.NotEmpty(t, back.Commit)
	p = mcptest.Call[helios.Persona](t, cs, "get_persona", map[string]any{"name": "default"})
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
		Process struct {
			Role      string `json:"role"`
			PID       int    `json:"pid"`
			WriterPID int    `json:"writer_pid"`
		} `json:"process"`
		State    statefile.State `json:"state"`
		Boot     string          `json:"boot"`
		Boots    int             `json:"boots"`
		Recovery []string        `json:"recovery"`
	}
	var got info
	deadline := time.Now().Add(hangAfter)
	for got = mcptest.Call[info](t, cs, "server_info", nil); got.State.Health == nil; got = mcptest.Call[info](t, cs, "server_info", nil) {
		require.False(t, time.Now().After(deadline), "no health result in server_info after %v", hangAfter)
		time.Sleep(5 * time.Millisecond)
	}
	assert.True(t, got.State.Health.OK, "%v", got.State.Health.Problems)
	assert.Equal(t, os.Getpid(), got.State.PID)
	assert.Equal(t, home, got.State.Home)
	assert.Equal(t, "fresh", got.Boot)
	assert.Equal(t, 1, got.Boots)
	assert.Empty(t, got.State.Token)
	assert.Equal(t, "writer", got.Process.Role, "its own client talks to the writer")
	assert.Equal(t, os.Getpid(), got.Process.PID)
	assert.Equal(t, os.Getpid(), got.Process.WriterPID)
	var st *statefile.State
	for { // the state file is written just after the server first answers
		var err error
		if st, err = statefile.Read(filepath.Join(home, statefile.FileName)); err == nil {
			break
		}
		require.ErrorIs(t, err, os.ErrNotExist)
		require.False(t, time.Now().After(deadline), "no state file after %v", hangAfter)
		time.Sleep(time.Millisecond)
	}
	require.NotEmpty(t, st.Token)
	res := mcptest.CallTool(t, cs, "server_info", nil)
	assert.NotContains(t, mcptest.Text(res), st.Token)
}

// BenchmarkNewServer builds helios's server: the go-sdk infers and checks
// the schemas of the nine tools, the largest part of a start that helios
// and bare-helios share (BenchmarkColdStart in cmd/helios).
//
//	go test -run '^$' -bench NewServer ./cmd/helios/internal/helios
func BenchmarkNewServer(b *testing.B) {
	env := &lifecycle.Env{Home: b.TempDir()}
	for b.Loop() {
		if _, err := helios.NewServer(env); err != nil {
			b.Fatal(err)
		}
	}
}
