package lifecycle_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/bootstrap"
	"github.com/mcpkeep/mcpkeep/internal/mcptest"
	"github.com/mcpkeep/mcpkeep/lifecycle"
	"github.com/mcpkeep/mcpkeep/statefile"
)

// TestRunAttaches: a second Run on a home in use attaches to the writer:
// its client is a session of the writer's, listed in the state file and
// counted in the registry, and goes when its client goes.
func TestRunAttaches(t *testing.T) {
	writer := run(t, options(t))
	assert.False(t, mcptest.Call[lifecycle.Route](t, writer.client, "route", nil).Attached)

	second := run(t, writer.opts)
	route := mcptest.Call[lifecycle.Route](t, second.client, "route", nil)
	assert.True(t, route.Attached)
	assert.Equal(t, os.Getpid(), route.WriterPID)
	writer.poll(t, "the attached session in the state file", func() bool {
		s, err := statefile.Read(writer.statePath())
		return err == nil && len(s.Sessions) == 1 && s.Sessions[0].Client == "test"
	})
	st := writer.state(t)
	assert.Equal(t, os.Getpid(), st.Sessions[0].PID)
	assert.Equal(t, filepath.Join(writer.opts.Home, "mcp.sock"), st.Socket)
	// The registry entry is rewritten after the state file: poll it too.
	writer.poll(t, "the attached session in the registry", func() bool {
		entries, err := statefile.NewRegistry(writer.opts.Registry).List()
		return err == nil && len(entries) == 1 && entries[0].Sessions == 1
	})

	require.NoError(t, second.stop(t))
	writer.poll(t, "no attached session", func() bool {
		s, err := statefile.Read(writer.statePath())
		return err == nil && len(s.Sessions) == 0
	})
	mcptest.Call[statefile.State](t, writer.client, "state", nil)
}

// TestRunTakesOver: when the writer's client goes, an attached Run takes
// the lock and becomes the writer; its client goes on without noticing,
// and a third, attached to the first, attaches to it.
func TestRunTakesOver(t *testing.T) {
	first := run(t, options(t))
	second := run(t, first.opts)
	third := run(t, first.opts)
	mcptest.Call[lifecycle.Route](t, second.client, "route", nil)
	mcptest.Call[lifecycle.Route](t, third.client, "route", nil)

	require.NoError(t, first.stop(t))
	// One of the two takes over; each client keeps working.
	for _, r := range []*running{second, third} {
		mcptest.Call[lifecycle.Route](t, r.client, "route", nil)
	}
	routes := []lifecycle.Route{
		mcptest.Call[lifecycle.Route](t, second.client, "route", nil),
		mcptest.Call[lifecycle.Route](t, third.client, "route", nil),
	}
	assert.NotEqual(t, routes[0].Attached, routes[1].Attached, "one writer, one attached: %+v", routes)
	second.poll(t, "a ready state file naming one attached session", func() bool {
		s, err := statefile.Read(second.statePath())
		return err == nil && s.Status == statefile.StatusReady && len(s.Sessions) == 1
	})

	require.NoError(t, second.stop(t))
	require.NoError(t, third.stop(t))
	_, err := os.Stat(first.statePath())
	assert.ErrorIs(t, err, os.ErrNotExist, "the last one out removed the state file")
	assert.NoFileExists(t, filepath.Join(first.opts.Home, "mcp.sock"))
	l, err := lifecycle.TryLock(first.opts.Home)
	require.NoError(t, err, "and released the lock")
	l.Unlock()
}

// TestRunSocketOutsideHome: a home whose path is too long for a socket
// address has its socket in $XDG_RUNTIME_DIR/mcpkeep-<uid>, which the state
// file names and a later Run attaches through. That directory is shared
// by every such home of the user: a writer that goes removes its socket
// and leaves the directory, where another home's writer may be about to
// bind, and which another user could take for their own if it went.
func TestRunSocketOutsideHome(t *testing.T) {
	runtime := t.TempDir()
	if len(runtime) > 60 {
		t.Skipf("the temp directory %s leaves no room for a socket path", runtime)
	}
	t.Setenv("XDG_RUNTIME_DIR", runtime)
	dir := filepath.Join(runtime, "mcpkeep-"+strconv.Itoa(os.Getuid()))
	longHome := func() lifecycle.Options {
		opts := options(t)
		opts.Home = filepath.Join(t.TempDir(), strings.Repeat("h", 100))
		return opts
	}

	a := run(t, longHome())
	attached := run(t, a.opts)
	assert.True(t, mcptest.Call[lifecycle.Route](t, attached.client, "route", nil).Attached)
	sockA := a.state(t).Socket
	assert.Equal(t, dir, filepath.Dir(sockA), "the state file names the socket outside the home")
	b := run(t, longHome())
	sockB := b.state(t).Socket
	assert.Equal(t, dir, filepath.Dir(sockB))
	assert.NotEqual(t, sockA, sockB, "each home its own socket")

	require.NoError(t, attached.stop(t))
	require.NoError(t, a.stop(t))
	assert.NoFileExists(t, sockA, "the writer removed its socket")
	fi, err := os.Stat(dir)
	require.NoError(t, err, "and left the directory")
	assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm())
	other := run(t, b.opts)
	assert.True(t, mcptest.Call[lifecycle.Route](t, other.client, "route", nil).Attached, "the other home's writer still takes attached clients")

	require.NoError(t, other.stop(t))
	require.NoError(t, b.stop(t))
	entries, err := os.ReadDir(dir)
	require.NoError(t, err, "the directory stays once every writer has gone")
	assert.Empty(t, entries, "and holds nothing")
}

// TestRunExclusiveWriter: a writer that runs Exclusive takes no attached
// clients: a later Run on its home returns the *LockedError, saying so.
func TestRunExclusiveWriter(t *testing.T) {
	opts := options(t)
	opts.Exclusive = true
	writer := run(t, opts)
	assert.Empty(t, writer.state(t).Socket)

	opts.Exclusive = false
	opts.Stdin, opts.Stdout = strings.NewReader(""), nil
	h, err := lifecycle.New(opts)
	require.NoError(t, err)
	err = h.Run(t.Context())
	var le *lifecycle.LockedError
	require.ErrorAs(t, err, &le)
	assert.Contains(t, err.Error(), "takes no attached clients", "at once: not after waiting for a socket")
}

// TestRunNoStdioLocked: a Run without stdio has no client to attach: on a
// home in use it returns the *LockedError.
func TestRunNoStdioLocked(t *testing.T) {
	writer := run(t, options(t))
	opts := writer.opts
	opts.NoStdio, opts.HTTP = true, "127.0.0.1:0"
	h, err := lifecycle.New(opts)
	require.NoError(t, err)
	err = h.Run(t.Context())
	require.ErrorIs(t, err, lifecycle.ErrLocked)
	assert.Contains(t, err.Error(), "stop it or use another home")
}

// TestRunAttachedServerRequests: a request of the server's to its client
// (elicitation) and a tools/list_changed notification reach a client
// through an attached process.
func TestRunAttachedServerRequests(t *testing.T) {
	opts := options(t)
	opts.NewServer = func(env *lifecycle.Env) (*mcp.Server, error) {
		s, err := newServer(env)
		mcp.AddTool(s, &mcp.Tool{Name: "ask", Description: "asks the client its name"},
			func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, map[string]any, error) {
				res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "name?",
					RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}}}})
				if err != nil {
					return nil, nil, err
				}
				return nil, res.Content, nil
			})
		mcp.AddTool(s, &mcp.Tool{Name: "grow", Description: "adds a tool"},
			func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
				mcp.AddTool(s, &mcp.Tool{Name: "grown"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
					return nil, nil, nil
				})
				return nil, nil, nil
			})
		return s, err
	}
	writer := run(t, opts)
	changed := make(chan struct{}, 1)
	copts := &mcp.ClientOptions{
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "ada"}}, nil
		},
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case changed <- struct{}{}:
			default:
			}
		},
	}
	// 2025-11-25: servers may still send requests of their own; from
	// 2026-07-28 on they return them inside a result instead.
	attached := runClient(t, writer.opts, copts, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	require.True(t, mcptest.Call[lifecycle.Route](t, attached.client, "route", nil).Attached)
	assert.Equal(t, map[string]any{"name": "ada"}, mcptest.Call[map[string]any](t, attached.client, "ask", nil))

	mcptest.CallTool(t, writer.client, "grow", nil)
	select {
	case <-changed:
	case <-time.After(hangAfter):
		t.Fatal("no tools/list_changed through the attached process")
	}
}

// TestRunAttachedHTTPOnTakeover: a Run with HTTP that attaches binds no
// port; when it takes over as the writer it binds HTTP, and its state
// file names the URL, which answers.
func TestRunAttachedHTTPOnTakeover(t *testing.T) {
	first := run(t, options(t))
	opts := first.opts
	opts.HTTP = "127.0.0.1:0"
	second := run(t, opts)
	mcptest.Call[lifecycle.Route](t, second.client, "route", nil)
	assert.Nil(t, first.state(t).HTTP, "attached, it bound nothing")

	require.NoError(t, first.stop(t))
	assert.False(t, mcptest.Call[lifecycle.Route](t, second.client, "route", nil).Attached, "it took over")
	var url string
	second.poll(t, "the new writer's URL in the state file", func() bool {
		s, err := statefile.Read(second.statePath())
		if err != nil || s.Status != statefile.StatusReady || s.HTTP == nil {
			return false
		}
		url = s.HTTP.URL
		return true
	})
	resp, err := http.Get(strings.TrimSuffix(url, "/mcp") + "/healthz")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
}

// TestRunAttachesToAnotherBuild: a process of another build attaches all
// the same, and logs both versions.
func TestRunAttachesToAnotherBuild(t *testing.T) {
	writer := run(t, options(t))
	opts := writer.opts
	opts.Version = "v9"
	var log logs
	opts.Logger = slog.New(&log)
	second := run(t, opts)
	assert.True(t, mcptest.Call[lifecycle.Route](t, second.client, "route", nil).Attached)
	recs := log.Find(slog.LevelWarn, "attached to the home's writer, a process of another build")
	require.Len(t, recs, 1)
	assert.Equal(t, "v0", mcptest.Attr(recs[0], "writer_version"))
	assert.Equal(t, "v9", mcptest.Attr(recs[0], "version"))
	assert.Equal(t, strconv.Itoa(os.Getpid()), mcptest.Attr(recs[0], "writer_pid"))
}

// TestRunRefusesAnotherServersWriter: a process of another server (another
// Options.Name) launched on a home in use is not attached to the writer,
// whose tools its client did not ask for: Run returns an error matching
// ErrLocked that names both servers, and the writer keeps no session of it.
func TestRunRefusesAnotherServersWriter(t *testing.T) {
	writer := run(t, options(t))
	opts := writer.opts
	opts.Name = "other"
	opts.Stdin, opts.Stdout = strings.NewReader(""), nil
	h, err := lifecycle.New(opts)
	require.NoError(t, err)
	err = h.Run(t.Context())
	require.ErrorIs(t, err, lifecycle.ErrLocked)
	assert.Contains(t, err.Error(), `it serves "other" and the home's writer serves "`+writer.opts.Name+`"`)
	assert.Contains(t, err.Error(), `give "other" a home of its own`)
	assert.Empty(t, writer.state(t).Sessions)
	mcptest.Call[lifecycle.Route](t, writer.client, "route", nil)
}

// TestRunRefusesAnotherServersHome: a home stamped by one server is
// refused to another, before anything in it changes, with an
// *OptionsError naming Options.Home (exit status 2 under Main); the same
// server starts on it as before.
func TestRunRefusesAnotherServersHome(t *testing.T) {
	opts := options(t)
	opts.Stdin, opts.Stdout = strings.NewReader(""), nil
	h, err := lifecycle.New(opts)
	require.NoError(t, err)
	require.NoError(t, h.Run(t.Context()), "the install")
	stamp := func() string {
		b, err := os.ReadFile(filepath.Join(opts.Home, bootstrap.VersionFile))
		require.NoError(t, err)
		return string(b)
	}
	before, stamped := treeOf(t, filepath.Join(opts.Home, "config")), stamp()
	assert.Contains(t, stamped, `"server": "`+opts.Name+`"`, "the install names its server")

	other := opts
	other.Name = "other"
	h, err = lifecycle.New(other)
	require.NoError(t, err)
	err = h.Run(t.Context())
	var oe *lifecycle.OptionsError
	require.ErrorAs(t, err, &oe)
	assert.Equal(t, "Home", oe.Field)
	require.ErrorIs(t, err, bootstrap.ErrOtherServer)
	assert.Contains(t, err.Error(), `is the home of server "`+opts.Name+`"`)
	assert.Equal(t, before, treeOf(t, filepath.Join(opts.Home, "config")), "nothing in config/ changed")
	assert.Equal(t, stamped, stamp(), "nor the stamp")

	h, err = lifecycle.New(opts)
	require.NoError(t, err)
	require.NoError(t, h.Run(t.Context()), "its own server starts on it")
}

// TestRunSaysItWaitsForAFrozenWriter: a launch on a home whose writer holds
// the lock but does not answer at its socket (hung, stopped) says so in its
// log while it waits, naming the writer's PID, rather than keeping silent
// until it gives up; and the end of a client that left no call to answer
// ends it, without waiting out the hello's timeout.
func TestRunSaysItWaitsForAFrozenWriter(t *testing.T) {
	opts := options(t)
	lock, err := lifecycle.TryLock(opts.Home)
	require.NoError(t, err)
	defer lock.Unlock()
	// A socket that takes connections and never says hello, as a frozen
	// writer's does: the kernel queues the connection.
	ln, err := net.Listen("unix", filepath.Join(opts.Home, "mcp.sock"))
	require.NoError(t, err)
	defer ln.Close()

	var l logs
	opts.Logger = slog.New(&l)
	stdin, client := io.Pipe()
	opts.Stdin, opts.Stdout = stdin, io.Discard
	h, err := lifecycle.New(opts)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- h.Run(t.Context()) }()

	const msg = "the home's writer has not answered at its socket yet; waiting for it"
	deadline := time.Now().Add(hangAfter)
	for len(l.Find(slog.LevelWarn, msg)) == 0 {
		require.True(t, time.Now().Before(deadline), "no word of the wait")
		time.Sleep(10 * time.Millisecond)
	}
	r := l.Find(slog.LevelWarn, msg)[0]
	assert.Equal(t, strconv.Itoa(os.Getpid()), mcptest.Attr(r, "writer_pid"))

	client.Close()
	select {
	case err := <-done:
		assert.NoError(t, err, "the client went: nothing to wait for")
	case <-time.After(hangAfter):
		t.Fatal("Run kept waiting after its client had gone")
	}
	// It left because its client went, not at the hello's timeout.
	assert.Len(t, l.Find(slog.LevelInfo, "the client went while the home's writer did not answer; leaving"), 1)
}
