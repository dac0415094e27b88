package lifecycle_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/atomicfile"
	"github.com/mcpkeep/mcpkeep/bootstrap"
	"github.com/mcpkeep/mcpkeep/gitstore"
	"github.com/mcpkeep/mcpkeep/internal/failpoint"
	"github.com/mcpkeep/mcpkeep/internal/mcptest"
	"github.com/mcpkeep/mcpkeep/lifecycle"
	"github.com/mcpkeep/mcpkeep/portmgr"
	"github.com/mcpkeep/mcpkeep/statefile"
)

// hangAfter is how long a test waits for Run to get ready or return before
// it fails it as hung; a failure detector, not a speed goal.
const hangAfter = 30 * time.Second

func newServer(env *lifecycle.Env) (*mcp.Server, error) {
	s := mcp.NewServer(&mcp.Implementation{Name: "notes", Version: "v0"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "state", Description: "the harness state"},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, statefile.State, error) {
			return nil, env.State(), nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "route", Description: "how the client reaches the server"},
		func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, lifecycle.Route, error) {
			return nil, env.Route(req.Session), nil
		})
	return s, nil
}

// options returns Options for a stdio server on a fresh home with a
// registry in the test's temporary directory.
func options(t *testing.T) lifecycle.Options {
	return lifecycle.Options{
		Name:      "notes",
		Version:   "v0",
		Home:      filepath.Join(t.TempDir(), "home"),
		Spec:      bootstrap.Spec{Schema: 1, Defaults: fstest.MapFS{"notes.yaml": {Data: []byte("notes: []\n")}}},
		NewServer: newServer,
		Registry:  filepath.Join(t.TempDir(), "servers.json"),
		NoSignals: true,
	}
}

// logs records log records for assertions.
type logs = mcptest.Logs

// running is a Harness running in the test, with a client connected over
// stdio when stdio is on.
type running struct {
	opts   lifecycle.Options
	cancel context.CancelFunc
	done   chan error
	stdin  io.WriteCloser // nil without stdio
	client *mcp.ClientSession
}

// run starts a Harness for opts and waits for its state file to be ready.
func run(t *testing.T, opts lifecycle.Options) *running {
	t.Helper()
	return runClient(t, opts, nil, nil)
}

// runClient is run with a client of copts that connects with sopts.
func runClient(t *testing.T, opts lifecycle.Options, copts *mcp.ClientOptions, sopts *mcp.ClientSessionOptions) *running {
	t.Helper()
	return runAs(t, opts, &mcp.Implementation{Name: "test", Version: "v0"}, copts, sopts)
}

// runAs is runClient with a client that names itself impl.
func runAs(t *testing.T, opts lifecycle.Options, impl *mcp.Implementation, copts *mcp.ClientOptions, sopts *mcp.ClientSessionOptions) *running {
	t.Helper()
	r := &running{opts: opts, done: make(chan error, 1)}
	var stdoutR io.Reader
	closeStdio := func(error) {}
	if !opts.NoStdio {
		inR, inW := io.Pipe()
		outR, outW := io.Pipe()
		r.opts.Stdin, r.opts.Stdout, r.stdin, stdoutR = inR, outW, inW, outR
		t.Cleanup(func() { inW.Close(); outR.Close() })
		// A Run that returns before it serves must fail the client's
		// Connect, not leave it blocked on a pipe nobody reads.
		closeStdio = func(err error) {
			err = fmt.Errorf("Run returned: %v", err)
			inR.CloseWithError(err)
			outW.CloseWithError(err)
		}
	}
	h, err := lifecycle.New(r.opts)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	r.cancel = cancel
	go func() {
		err := h.Run(ctx)
		closeStdio(err)
		r.done <- err
	}()
	t.Cleanup(func() {
		cancel()
		r.wait(t)
	})
	if stdoutR != nil {
		client := mcp.NewClient(impl, copts)
		r.client, err = client.Connect(ctx, &mcp.IOTransport{Reader: io.NopCloser(stdoutR), Writer: r.stdin}, sopts)
		require.NoError(t, err)
	}
	r.poll(t, "a ready state file", func() bool {
		s, err := statefile.Read(r.statePath())
		return err == nil && s.Status == statefile.StatusReady
	})
	return r
}

func (r *running) statePath() string { return filepath.Join(r.opts.Home, statefile.FileName) }

func (r *running) state(t *testing.T) *statefile.State {
	t.Helper()
	s, err := statefile.Read(r.statePath())
	require.NoError(t, err)
	return s
}

// poll calls cond until it holds, failing the test if Run returns first or
// after hangAfter.
func (r *running) poll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(hangAfter)
	for !cond() {
		select {
		case err := <-r.done:
			r.done <- err
			t.Fatalf("Run returned (%v) before %s", err, what)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s after %v", what, hangAfter)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// wait waits for Run to return and returns its error.
func (r *running) wait(t *testing.T) error {
	t.Helper()
	select {
	case err := <-r.done:
		r.done <- err // for later calls
		return err
	case <-time.After(hangAfter):
		t.Fatalf("Run did not return within %v", hangAfter)
		return nil
	}
}

// stop closes stdin, or cancels Run's context without stdio, and returns
// Run's error.
func (r *running) stop(t *testing.T) error {
	t.Helper()
	if r.stdin != nil {
		r.stdin.Close()
	} else {
		r.cancel()
	}
	return r.wait(t)
}

func TestNewChecksOptions(t *testing.T) {
	ok := func(*lifecycle.Options) {}
	migration := bootstrap.Migration{From: 1, To: 2, Name: "one", Apply: func(context.Context, string) error { return nil }}
	tests := []struct {
		name   string
		change func(*lifecycle.Options)
		field  string // the *OptionsError's Field; "" for valid Options
	}{
		{"defaults", ok, ""},
		{"no name", func(o *lifecycle.Options) { o.Name = "" }, "Name"},
		{"a blank name", func(o *lifecycle.Options) { o.Name = " \t" }, "Name"},
		{"no home", func(o *lifecycle.Options) { o.Home = "" }, "Home"},
		{"a home with a NUL byte", func(o *lifecycle.Options) { o.Home = "a\x00b" }, "Home"},
		{"no NewServer", func(o *lifecycle.Options) { o.NewServer = nil }, "NewServer"},
		{"no transport", func(o *lifecycle.Options) { o.NoStdio = true }, "NoStdio"},
		{"HTTP only", func(o *lifecycle.Options) { o.NoStdio, o.HTTP = true, "127.0.0.1:0" }, ""},
		{"HTTP without a port", func(o *lifecycle.Options) { o.HTTP = "127.0.0.1" }, "HTTP"},
		{"HTTP with a port name", func(o *lifecycle.Options) { o.HTTP = "127.0.0.1:http" }, "HTTP"},
		{"HTTP with a port out of range", func(o *lifecycle.Options) { o.HTTP = "127.0.0.1:65536" }, "HTTP"},
		{"HTTP with a negative port", func(o *lifecycle.Options) { o.HTTP = "127.0.0.1:-1" }, "HTTP"},
		{"HTTP on the highest port", func(o *lifecycle.Options) { o.HTTP = "127.0.0.1:65535" }, ""},
		{"NoToken on 127.0.0.1", func(o *lifecycle.Options) { o.HTTP, o.NoToken = "127.0.0.1:0", true }, ""},
		{"NoToken on localhost", func(o *lifecycle.Options) { o.HTTP, o.NoToken = "localhost:0", true }, ""},
		{"NoToken on ::1", func(o *lifecycle.Options) { o.HTTP, o.NoToken = "[::1]:0", true }, ""},
		{"NoToken on 0.0.0.0", func(o *lifecycle.Options) { o.HTTP, o.NoToken = "0.0.0.0:0", true }, "NoToken"},
		{"NoToken on ::", func(o *lifecycle.Options) { o.HTTP, o.NoToken = "[::]:0", true }, "NoToken"},
		{"NoToken on a LAN address", func(o *lifecycle.Options) { o.HTTP, o.NoToken = "192.168.1.10:8080", true }, "NoToken"},
		{"NoToken on a host name", func(o *lifecycle.Options) { o.HTTP, o.NoToken = "example.com:80", true }, "NoToken"},
		{"token on a LAN address", func(o *lifecycle.Options) { o.HTTP = "192.168.1.10:8080" }, ""},
		{"HTTPMode out of range", func(o *lifecycle.Options) { o.HTTPMode = 7 }, "HTTPMode"},
		{"AdvertiseURL without an Elector", func(o *lifecycle.Options) { o.AdvertiseURL = "http://host-a:8080/mcp" }, "AdvertiseURL"},
		{"AdvertiseURL that is no URL", func(o *lifecycle.Options) { o.AdvertiseURL = "host-a:8080" }, "AdvertiseURL"},
		{"the zero Spec", func(o *lifecycle.Options) { o.Spec = bootstrap.Spec{} }, ""},
		{"a negative schema", func(o *lifecycle.Options) { o.Spec.Schema = -1 }, "Spec.Schema"},
		{"migrations without a schema", func(o *lifecycle.Options) { o.Spec = bootstrap.Spec{Migrations: []bootstrap.Migration{migration}} }, "Spec.Schema"},
		{"migrations past the schema", func(o *lifecycle.Options) { o.Spec.Migrations = []bootstrap.Migration{migration} }, "Spec.Migrations[0]"},
		{"a directory outside the home", func(o *lifecycle.Options) { o.Spec.Dirs = []string{"../cache"} }, "Spec.Dirs[0]"},
		{"a directory at the stamp", func(o *lifecycle.Options) { o.Spec.Dirs = []string{"cache", ".version"} }, "Spec.Dirs[1]"},
		{"a directory at the lock", func(o *lifecycle.Options) { o.Spec.Dirs = []string{".lock"} }, "Spec.Dirs[0]"},
		{"a directory at the socket", func(o *lifecycle.Options) { o.Spec.Dirs = []string{"mcp.sock/x"} }, "Spec.Dirs[0]"},
		{"Spec.Home is replaced by Home", func(o *lifecycle.Options) { o.Spec.Home = "" }, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := options(t)
			tt.change(&opts)
			h, err := lifecycle.New(opts)
			if tt.field == "" {
				require.NoError(t, err)
				assert.NotNil(t, h)
				return
			}
			var oe *lifecycle.OptionsError
			require.ErrorAs(t, err, &oe)
			assert.Equal(t, tt.field, oe.Field, "%v", err)
			assert.True(t, strings.HasPrefix(err.Error(), "lifecycle: Options."+tt.field+" "), "the message names the field: %v", err)
			assert.Nil(t, h)
		})
	}
}

// TestRunZeroSpec: a server whose Options leave Spec zero installs a home
// of schema 1 with no default files, and serves.
func TestRunZeroSpec(t *testing.T) {
	opts := options(t)
	opts.Spec = bootstrap.Spec{}
	r := run(t, opts)
	require.NoError(t, r.stop(t))
	info, err := bootstrap.Detect(opts.Home, 1)
	require.NoError(t, err)
	assert.Equal(t, bootstrap.Ready, info.State)
	assert.Equal(t, 1, info.Schema)
}

// TestRunHomeIsAFile: a Home that is a file, or inside one, is refused by
// Run with an *OptionsError naming Options.Home, and the file is left as it
// was.
func TestRunHomeIsAFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "afile")
	require.NoError(t, os.WriteFile(file, []byte("mine"), 0o600))
	for _, home := range []string{file, filepath.Join(file, "home")} {
		t.Run(filepath.Base(home), func(t *testing.T) {
			opts := options(t)
			opts.Home = home
			h, err := lifecycle.New(opts)
			require.NoError(t, err)
			err = h.Run(t.Context())
			var oe *lifecycle.OptionsError
			require.ErrorAs(t, err, &oe)
			assert.Equal(t, "Home", oe.Field)
			assert.Contains(t, err.Error(), file, "it names the file")
			data, err := os.ReadFile(file)
			require.NoError(t, err)
			assert.Equal(t, "mine", string(data))
		})
	}
}

// TestRunNewServerNil: a NewServer that returns a nil server and no error
// fails Run with an *OptionsError naming Options.NewServer, instead of
// crashing the process inside the go-sdk, and leaves nothing behind.
func TestRunNewServerNil(t *testing.T) {
	opts := options(t)
	opts.NewServer = func(*lifecycle.Env) (*mcp.Server, error) { return nil, nil }
	h, err := lifecycle.New(opts)
	require.NoError(t, err)
	err = h.Run(t.Context())
	var oe *lifecycle.OptionsError
	require.ErrorAs(t, err, &oe)
	assert.Equal(t, "NewServer", oe.Field)
	assert.NoFileExists(t, filepath.Join(opts.Home, statefile.FileName))
	l, err := lifecycle.TryLock(opts.Home)
	require.NoError(t, err, "unlocked")
	l.Unlock()
}

// TestRunStdio: a stdio-only server serves, is registered although it has no
// HTTP, and cleans up after itself at stdin EOF.
func TestRunStdio(t *testing.T) {
	r := run(t, options(t))
	st := r.state(t)
	assert.True(t, st.Ours(), "the state file names this process")
	assert.True(t, st.Stdio)
	assert.Nil(t, st.HTTP)
	assert.Empty(t, st.Token, "no HTTP, no token")

	entries, err := statefile.NewRegistry(r.opts.Registry).List()
	require.NoError(t, err)
	require.Len(t, entries, 1, "a stdio-only server is registered")
	assert.Equal(t, r.opts.Home, entries[0].ID)
	assert.True(t, entries[0].State.Stdio)

	res, err := r.client.CallTool(t.Context(), &mcp.CallToolParams{Name: "state"})
	require.NoError(t, err)
	assert.False(t, res.IsError)

	require.NoError(t, r.stop(t))
	assert.NoFileExists(t, r.statePath())
	entries, err = statefile.NewRegistry(r.opts.Registry).List()
	require.NoError(t, err)
	assert.Empty(t, entries, "unregistered")
	l, err := lifecycle.TryLock(r.opts.Home)
	require.NoError(t, err, "unlocked")
	l.Unlock()
}

// TestRunStartJobFails: the boot record and the state file are written
// while the server is built; either failing fails Run as a failing
// NewServer does, once the other jobs are done, leaving no state file, no
// registry entry and no lock, and a boot record not written stays unwritten.
func TestRunStartJobFails(t *testing.T) {
	for _, point := range []string{"bootstrap.before-stamp", "lifecycle.after-state-write"} {
		t.Run(point, func(t *testing.T) {
			opts := options(t)
			opts.Stdin, opts.Stdout = strings.NewReader(""), io.Discard // stdin at EOF: install, then stop
			h, err := lifecycle.New(opts)
			require.NoError(t, err)
			require.NoError(t, h.Run(t.Context()))
			before, err := bootstrap.Detect(opts.Home, 1)
			require.NoError(t, err)

			require.NoError(t, failpoint.Set(point+"=error"))
			t.Cleanup(func() { failpoint.Set("") })
			h, err = lifecycle.New(opts)
			require.NoError(t, err)
			runErr := h.Run(t.Context())
			require.ErrorIs(t, runErr, failpoint.ErrInjected)
			require.NoError(t, failpoint.Set(""))

			assert.NoFileExists(t, filepath.Join(opts.Home, statefile.FileName))
			entries, err := statefile.NewRegistry(opts.Registry).List()
			require.NoError(t, err)
			assert.Empty(t, entries)
			after, err := bootstrap.Detect(opts.Home, 1)
			require.NoError(t, err)
			if point == "bootstrap.before-stamp" {
				assert.Contains(t, runErr.Error(), "record the boot")
				assert.Equal(t, before.Boots, after.Boots, "the boot was not recorded")
			} else {
				assert.Equal(t, before.Boots+1, after.Boots, "the boot was recorded")
			}
			l, err := lifecycle.TryLock(opts.Home)
			require.NoError(t, err, "unlocked")
			l.Unlock()
		})
	}
}

// TestRunLockedExclusive: with Exclusive, a second Run on a home in use
// returns the *LockedError naming the writer, and leaves its state alone.
func TestRunLockedExclusive(t *testing.T) {
	r := run(t, options(t))
	opts := r.opts
	opts.Exclusive = true
	h, err := lifecycle.New(opts)
	require.NoError(t, err)
	err = h.Run(t.Context())
	var le *lifecycle.LockedError
	require.ErrorAs(t, err, &le)
	assert.Equal(t, os.Getpid(), le.PID)
	assert.True(t, strings.HasSuffix(err.Error(), "; stop it or use another home"), err.Error())
	assert.Equal(t, 1, strings.Count(err.Error(), ";"), "one remedy: %s", err)
	assert.True(t, r.state(t).Ours(), "the holder's state file is untouched")
}

// TestRunNewServerFails: Run returns NewServer's error and leaves no state
// file, no registry entry and no lock behind.
func TestRunNewServerFails(t *testing.T) {
	opts := options(t)
	boom := errors.New("boom")
	opts.NewServer = func(*lifecycle.Env) (*mcp.Server, error) { return nil, boom }
	h, err := lifecycle.New(opts)
	require.NoError(t, err)
	require.ErrorIs(t, h.Run(t.Context()), boom)
	assert.NoFileExists(t, filepath.Join(opts.Home, statefile.FileName))
	// The server is built while the state file and the registry entry are
	// written, so the entry may have been made; it must be gone.
	entries, err := statefile.NewRegistry(opts.Registry).List()
	if !errors.Is(err, fs.ErrNotExist) {
		require.NoError(t, err)
	}
	assert.Empty(t, entries)
	l, err := lifecycle.TryLock(opts.Home)
	require.NoError(t, err, "unlocked")
	l.Unlock()
}

// TestRunWritesStateOnce: the state file is written once, as ready, after
// NewServer built the server: no "starting" file precedes it (an fsynced
// replace that cost every start time), and a NewServer that fails never
// leaves one to clean up.
func TestRunWritesStateOnce(t *testing.T) {
	opts := options(t)
	var during error
	opts.NewServer = func(env *lifecycle.Env) (*mcp.Server, error) {
		_, during = os.Stat(filepath.Join(env.Home, statefile.FileName))
		return newServer(env)
	}
	r := run(t, opts)
	assert.ErrorIs(t, during, fs.ErrNotExist, "no state file while NewServer runs")
	assert.Equal(t, statefile.StatusReady, r.state(t).Status)
	require.NoError(t, r.stop(t))
}

// TestRunCommitsAtShutdown: a config file edited by hand while the server
// runs is committed when it stops.
func TestRunCommitsAtShutdown(t *testing.T) {
	r := run(t, options(t))
	require.NoError(t, atomicfile.WriteFile(filepath.Join(r.opts.Home, "config", "notes.yaml"), []byte("notes: [edited]\n"), 0o600))
	require.NoError(t, r.stop(t))

	store, err := gitstore.Open(filepath.Join(r.opts.Home, "config"), &gitstore.Options{ReadOnly: true})
	require.NoError(t, err)
	defer store.Close()
	dirty, err := store.Dirty()
	require.NoError(t, err)
	assert.False(t, dirty)
	history, err := store.History("notes.yaml", 1)
	require.NoError(t, err)
	require.Len(t, history, 1)
	assert.Contains(t, history[0].Message, "shutdown")
	data, err := store.ReadAt("HEAD", "notes.yaml")
	require.NoError(t, err)
	assert.Equal(t, "notes: [edited]\n", string(data))
}

// TestRunGitAuthor: Spec.Git's author signs every commit of the home, not
// only the install's: a hand edit committed at shutdown, and one recovery
// commits at the next start. Spec.Git's ReadOnly is the harness's to
// decide, and ignored.
func TestRunGitAuthor(t *testing.T) {
	opts := options(t)
	opts.Spec.Git = &gitstore.Options{AuthorName: "Notes Bot", AuthorEmail: "bot@example.com", ReadOnly: true}
	notes := filepath.Join(opts.Home, "config", "notes.yaml")
	r := run(t, opts)
	require.NoError(t, atomicfile.WriteFile(notes, []byte("notes: [at shutdown]\n"), 0o600))
	require.NoError(t, r.stop(t))
	require.NoError(t, atomicfile.WriteFile(notes, []byte("notes: [while stopped]\n"), 0o600))
	require.NoError(t, run(t, opts).stop(t))

	store, err := gitstore.Open(filepath.Join(opts.Home, "config"), &gitstore.Options{ReadOnly: true})
	require.NoError(t, err)
	defer store.Close()
	history, err := store.History("notes.yaml", 0)
	require.NoError(t, err)
	require.Len(t, history, 3, "install, shutdown, recovery")
	for _, c := range history {
		assert.Equal(t, "Notes Bot", c.Author, "commit %q", c.Message)
	}
}

// TestRunHealthChecks: checks run, their result is in the state file and in
// what Env.State gives tools, and a deleted state file or PID file is
// written again.
func TestRunHealthChecks(t *testing.T) {
	opts := options(t)
	opts.HealthInterval = 10 * time.Millisecond
	var log logs
	opts.Logger = slog.New(&log)
	r := run(t, opts)
	r.poll(t, "a health result in the state file", func() bool {
		s, err := statefile.Read(r.statePath())
		return err == nil && s.Health != nil
	})
	st := r.state(t)
	assert.True(t, st.Health.OK, "%v", st.Health.Problems)
	assert.False(t, st.Health.CheckedAt.IsZero())

	res, err := r.client.CallTool(t.Context(), &mcp.CallToolParams{Name: "state"})
	require.NoError(t, err)
	seen := res.StructuredContent.(map[string]any)
	assert.Contains(t, seen, "health", "tools see the health result")
	assert.NotContains(t, seen, "token")

	for _, name := range []string{statefile.FileName, lifecycle.LockFile} {
		path := filepath.Join(opts.Home, name)
		r.poll(t, "a failed check naming "+name, func() bool {
			for _, rec := range log.Find(slog.LevelError, "health check failed") {
				if strings.Contains(mcptest.Attr(rec, "problems"), path) {
					return true
				}
			}
			// A check that read the state file just before it was removed
			// writes it again with nothing to report: remove it until a
			// check finds it gone.
			require.NoError(t, ignoreNotExist(os.Remove(path)))
			return false
		})
		r.poll(t, name+" written again", func() bool {
			_, err := os.Stat(path)
			return err == nil
		})
	}

	// A state file naming another process is taken back.
	other := *r.state(t)
	other.PID, other.Token = 1, ""
	require.NoError(t, statefile.Write(r.statePath(), &other))
	r.poll(t, "the state file taken back", func() bool {
		s, err := statefile.Read(r.statePath())
		return err == nil && s.Ours()
	})
	st = r.state(t)
	assert.Equal(t, statefile.StatusReady, st.Status)
	require.NoError(t, r.stop(t))
}

// exposedWarning is logged when HTTP listens beyond loopback.
const exposedWarning = "HTTP: other machines can reach this server; every request still needs the bearer token (bind 127.0.0.1 to serve this machine alone)"

func ignoreNotExist(err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// TestRunHealthAtStart: with the default interval, 30 s, the state file
// and what tools see carry a health check from the start: the first one
// runs before the server is ready.
func TestRunHealthAtStart(t *testing.T) {
	r := run(t, options(t))
	st := r.state(t)
	require.NotNil(t, st.Health, "the ready state file holds a health check")
	assert.True(t, st.Health.OK, "%v", st.Health.Problems)
	assert.False(t, st.Health.CheckedAt.IsZero())
	res, err := r.client.CallTool(t.Context(), &mcp.CallToolParams{Name: "state"})
	require.NoError(t, err)
	assert.Contains(t, res.StructuredContent.(map[string]any), "health", "tools see it")
	require.NoError(t, r.stop(t))
}

func httpOptions(t *testing.T) lifecycle.Options {
	opts := options(t)
	opts.NoStdio, opts.HTTP = true, "127.0.0.1:0"
	opts.ShutdownTimeout = time.Second
	return opts
}

func get(t *testing.T, url, token string) int {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url,
		strings.NewReader(mcptest.Initialize))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode
}

func TestRunHTTP(t *testing.T) {
	t.Run("token", func(t *testing.T) {
		opts := httpOptions(t)
		var log logs
		opts.Logger = slog.New(&log)
		r := run(t, opts)
		st := r.state(t)
		require.NotNil(t, st.HTTP)
		assert.NotEmpty(t, st.Token)
		assert.False(t, st.Stdio)
		assert.Equal(t, http.StatusUnauthorized, get(t, st.HTTP.URL, ""))
		assert.Equal(t, http.StatusOK, get(t, st.HTTP.URL, st.Token))
		require.NoError(t, r.stop(t))
		assert.NoFileExists(t, r.statePath())
		assert.Empty(t, log.Find(slog.LevelWarn, exposedWarning), "loopback is not exposed")
	})
	// The token is the home's, as the port is: the next start serves the
	// same one, so a client configured with the URL and the token keeps
	// working; a token file that holds no token is replaced, saying so.
	t.Run("kept across starts", func(t *testing.T) {
		opts := httpOptions(t)
		r := run(t, opts)
		first := r.state(t)
		require.NoError(t, r.stop(t))
		path := filepath.Join(opts.Home, bootstrap.TokenFile)
		fi, err := os.Stat(path)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		assert.Equal(t, first.Token+"\n", string(data))

		r = run(t, opts)
		second := r.state(t)
		assert.Equal(t, first.Token, second.Token)
		assert.Equal(t, first.HTTP.URL, second.HTTP.URL)
		assert.Equal(t, http.StatusOK, get(t, second.HTTP.URL, first.Token))
		require.NoError(t, r.stop(t))

		// A file that is not a token only this user reads is replaced.
		elsewhere := filepath.Join(t.TempDir(), "token")
		require.NoError(t, os.WriteFile(elsewhere, []byte(first.Token+"\n"), 0o600))
		for name, spoil := range map[string]func() error{
			"cut short":      func() error { return os.WriteFile(path, []byte("cut sho"), 0o600) },
			"open to others": func() error { return os.Chmod(path, 0o644) },
			"a link":         func() error { os.Remove(path); return os.Symlink(elsewhere, path) },
		} {
			require.NoError(t, spoil(), name)
			var log logs
			opts.Logger = slog.New(&log)
			r = run(t, opts)
			now := r.state(t)
			assert.NotEqual(t, first.Token, now.Token, name)
			assert.Len(t, now.Token, 64, name)
			recs := log.Find(slog.LevelWarn, "the home's HTTP token file cannot be trusted; making a new token")
			assert.Len(t, recs, 1, name)
			assert.Equal(t, http.StatusOK, get(t, now.HTTP.URL, now.Token), name)
			require.NoError(t, r.stop(t))
			fi, err := os.Lstat(path)
			require.NoError(t, err)
			assert.Equal(t, os.FileMode(0o600), fi.Mode(), "%s: a 0600 file again", name)
		}
		data, err = os.ReadFile(elsewhere)
		require.NoError(t, err)
		assert.Equal(t, first.Token+"\n", string(data), "the link's target is left alone")
	})
	t.Run("NoToken on loopback", func(t *testing.T) {
		opts := httpOptions(t)
		opts.NoToken = true
		r := run(t, opts)
		st := r.state(t)
		require.NotNil(t, st.HTTP)
		assert.Empty(t, st.Token)
		assert.Equal(t, http.StatusOK, get(t, st.HTTP.URL, ""))
		require.NoError(t, r.stop(t))
	})
}

// TestRunHTTPLastPortOutOfRange: the last run's port is only a
// preference: one out of range in a stale state file is ignored, not an
// error that turns HTTP off.
func TestRunHTTPLastPortOutOfRange(t *testing.T) {
	opts := httpOptions(t)
	r := run(t, opts)
	stale := *r.state(t)
	require.NoError(t, r.stop(t))
	stale.PID, stale.StartTime, stale.Status = 999999, 1, statefile.StatusStarting // a dead server's
	stale.HTTP = &statefile.HTTP{Host: "127.0.0.1", Port: 70000, URL: "http://127.0.0.1:70000/mcp"}
	require.NoError(t, statefile.Write(filepath.Join(opts.Home, statefile.FileName), &stale))

	r = run(t, opts)
	st := r.state(t)
	require.NotNil(t, st.HTTP, "HTTP is served")
	assert.Equal(t, http.StatusOK, get(t, st.HTTP.URL, st.Token))
	require.NoError(t, r.stop(t))
}

// TestExposed: the warning that other machines can reach the server is for
// every address but loopback. (Tests bind loopback only, so the addresses
// are checked, not bound.)
func TestExposed(t *testing.T) {
	for _, tt := range []struct {
		addr    string
		exposed bool
	}{
		{"127.0.0.1:8080", false},
		{"127.0.0.2:8080", false},
		{"[::1]:8080", false},
		{"0.0.0.0:8080", true},
		{"[::]:8080", true},
		{"192.168.1.10:8080", true},
		{"[2001:db8::1]:8080", true},
	} {
		addr, err := net.ResolveTCPAddr("tcp", tt.addr)
		require.NoError(t, err)
		assert.Equal(t, tt.exposed, lifecycle.Exposed(addr), tt.addr)
	}
	assert.True(t, lifecycle.Exposed(&net.UnixAddr{Name: "/tmp/s", Net: "unix"}), "not known to be loopback")
}

// TestRunHTTPPortTaken: the port asked for is taken; the server comes up on
// another one and says so.
func TestRunHTTPPortTaken(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer taken.Close()
	port := taken.Addr().(*net.TCPAddr).Port
	opts := httpOptions(t)
	opts.HTTP = taken.Addr().String()
	var log logs
	opts.Logger = slog.New(&log)
	r := run(t, opts)
	st := r.state(t)
	require.NotNil(t, st.HTTP)
	assert.NotEqual(t, port, st.HTTP.Port)
	assert.Equal(t, http.StatusOK, get(t, st.HTTP.URL, st.Token))
	warned := slices.ContainsFunc(log.Find(slog.LevelWarn, "HTTP: the port asked for is taken; serving on another"), func(r slog.Record) bool {
		return mcptest.Attr(r, "url") == st.HTTP.URL
	})
	assert.True(t, warned, "the fallback is logged with the URL")
	require.NoError(t, r.stop(t))
}

// unbindable is an address no test machine has: TEST-NET-1 (RFC 5737).
const unbindable = "192.0.2.1:0"

// TestRunHTTPBindFailureKeepsStdio: HTTP cannot bind at all; the server
// runs on stdio only and says so.
func TestRunHTTPBindFailureKeepsStdio(t *testing.T) {
	opts := options(t)
	opts.HTTP = unbindable
	var log logs
	opts.Logger = slog.New(&log)
	r := run(t, opts)
	st := r.state(t)
	assert.Nil(t, st.HTTP)
	assert.Empty(t, st.Token)
	assert.True(t, st.Stdio)
	assert.NotEmpty(t, log.Find(slog.LevelError, "HTTP transport off: could not bind; serving stdio only"))
	res, err := r.client.CallTool(t.Context(), &mcp.CallToolParams{Name: "state"})
	require.NoError(t, err)
	assert.False(t, res.IsError)
	require.NoError(t, r.stop(t))
}

// TestRunHTTPOnlyBindFailure: with stdio off, a bind failure is Run's
// error, and it leaves no state file or registry entry behind.
func TestRunHTTPOnlyBindFailure(t *testing.T) {
	opts := httpOptions(t)
	opts.HTTP = unbindable
	h, err := lifecycle.New(opts)
	require.NoError(t, err)
	err = h.Run(t.Context())
	require.ErrorIs(t, err, portmgr.ErrNoPort)
	assert.NoFileExists(t, filepath.Join(opts.Home, statefile.FileName))
	assert.NoFileExists(t, opts.Registry)
}
