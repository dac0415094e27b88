package helios_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/cmd/internal/helios"
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

// TestReadsAreNeverStale: get_persona and get_config read through a
// cache of the decoded files (atomicfile.Cache), and still answer what is
// on disk after every kind of change: the tools' own, a rollback's, a hand
// edit in place at the same size (the one a cache keyed by size and times
// could miss), an editor's replace; and refuse, as an uncached read does,
// a file or a directory replaced by a link, a fifo, or a file grown past
// MaxFileSize, though the cache holds the file's earlier value.
func TestReadsAreNeverStale(t *testing.T) {
	const outsideMarker = "OUTSIDE-THE-HOME-5d20a3"
	cs, home := serve(t, func(o *lifecycle.Options) { o.MaxFileSize = 4096 })
	personas := filepath.Join(home, "config", "personas")
	path := filepath.Join(personas, "default.yaml")
	tone := func() string {
		t.Helper()
		return mcptest.Call[helios.Persona](t, cs, "get_persona", nil).Preferences["tone"]
	}
	refused := func(what string) {
		t.Helper()
		res := mcptest.CallTool(t, cs, "get_persona", nil)
		assert.True(t, res.IsError, "%s: refused", what)
		assert.NotContains(t, mcptest.Text(res), outsideMarker, what)
		res = mcptest.CallTool(t, cs, "get_config", nil)
		assert.True(t, res.IsError, "%s: refused by get_config too", what)
	}
	restore := func() {
		t.Helper()
		require.NoError(t, os.RemoveAll(path))
		require.NoError(t, os.WriteFile(path, []byte("name: default\npreferences: {tone: t000}\n"), 0o600))
		require.Equal(t, "t000", tone())
	}
	assert.Equal(t, "neutral", tone())

	for i := range 10 { // this process's changes
		v := fmt.Sprintf("u%03d", i)
		mcptest.Call[change](t, cs, "update_preference", map[string]any{"key": "tone", "value": v})
		require.Equal(t, v, tone(), "after update_preference")
	}
	h := mcptest.Call[history](t, cs, "history", map[string]any{"path": "personas/default.yaml", "limit": 2})
	mcptest.Call[change](t, cs, "rollback", map[string]any{"rev": h.Commits[1].Hash})
	require.Equal(t, "u008", tone(), "after rollback")

	for i := range 100 { // hand edits in place, every one the same size
		v := fmt.Sprintf("t%03d", i)
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
		require.NoError(t, err)
		_, err = f.WriteString("name: default\npreferences: {tone: " + v + "}\n")
		require.NoError(t, err)
		require.NoError(t, f.Close())
		require.Equal(t, v, tone(), "after an edit in place")
	}
	tmp := path + ".swp" // an editor's save: write aside, rename over
	require.NoError(t, os.WriteFile(tmp, []byte("name: default\npreferences: {tone: vim}\n"), 0o600))
	require.NoError(t, os.Rename(tmp, path))
	require.Equal(t, "vim", tone(), "after an editor's replace")
	base := filepath.Join(home, "config", "base.yaml")
	require.NoError(t, os.WriteFile(base, []byte("name: helios\nactive_persona: concise\n"), 0o600))
	assert.Equal(t, "concise", mcptest.Call[helios.Persona](t, cs, "get_persona", nil).Name, "base.yaml edited by hand")
	require.NoError(t, os.WriteFile(base, []byte("name: helios\nactive_persona: default\n"), 0o600))

	outside := t.TempDir()
	evil := filepath.Join(outside, "default.yaml")
	require.NoError(t, os.WriteFile(evil, []byte("name: default\npreferences: {tone: "+outsideMarker+"}\n"), 0o600))
	restore()
	require.NoError(t, os.Remove(path))
	require.NoError(t, os.Symlink(evil, path))
	refused("file replaced by a link")

	restore()
	moved := filepath.Join(outside, "personas")
	require.NoError(t, os.Rename(personas, moved))
	require.NoError(t, os.Symlink(moved, personas))
	refused("directory replaced by a link to it")
	require.NoError(t, os.Remove(personas))
	require.NoError(t, os.Rename(moved, personas))

	restore()
	require.NoError(t, os.Remove(path))
	require.NoError(t, syscall.Mkfifo(path, 0o600))
	refused("file replaced by a fifo")

	restore()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = f.WriteString("# " + strings.Repeat("x", 5000) + "\n")
	require.NoError(t, err)
	require.NoError(t, f.Close())
	refused("file grown past MaxFileSize")
	restore()
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
//	go test -run '^$' -bench NewServer ./cmd/internal/helios
func BenchmarkNewServer(b *testing.B) {
	env := &lifecycle.Env{Home: b.TempDir()}
	for b.Loop() {
		if _, err := helios.NewServer(env); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGetPersona calls get_persona over stdio pipes, in this process:
// on helios, on the harness in a home it installed (impl=helios), and on a
// go-sdk server with one tool of the same name answering a fixed persona
// (impl=trivial). The difference is what helios's tool costs per call,
// reads of base.yaml and of the persona's file included, apart from any
// transport; -cpuprofile shows where.
//
//	go test -run '^$' -bench GetPersona -benchmem -count 6 ./cmd/internal/helios
func BenchmarkGetPersona(b *testing.B) {
	b.Run("impl=helios", func(b *testing.B) {
		cs, _ := serve(b, func(*lifecycle.Options) {})
		benchCalls(b, cs)
	})
	b.Run("impl=trivial", func(b *testing.B) {
		server := mcp.NewServer(&mcp.Implementation{Name: "trivial", Version: "v0"}, nil)
		answer := helios.Persona{Name: "default", Preferences: map[string]string{"tone": "neutral", "verbosity": "normal"}}
		mcp.AddTool(server, &mcp.Tool{Name: "get_persona"},
			func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, helios.Persona, error) {
				return nil, answer, nil
			})
		ct, st := mcp.NewInMemoryTransports()
		ss, err := server.Connect(b.Context(), st, nil)
		require.NoError(b, err)
		b.Cleanup(func() { ss.Close() })
		client := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "v0"}, nil)
		cs, err := client.Connect(b.Context(), ct, nil)
		require.NoError(b, err)
		b.Cleanup(func() { cs.Close() })
		benchCalls(b, cs)
	})
}

func benchCalls(b *testing.B, cs *mcp.ClientSession) {
	for b.Loop() {
		res, err := cs.CallTool(b.Context(), &mcp.CallToolParams{Name: "get_persona"})
		if err != nil || res.IsError {
			b.Fatalf("get_persona: %v %s", err, mcptest.Text(res))
		}
	}
}
