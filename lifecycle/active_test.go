package lifecycle_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/gitstore"
	"github.com/mcpkeep/mcpkeep/internal/mcptest"
	"github.com/mcpkeep/mcpkeep/lifecycle"
	"github.com/mcpkeep/mcpkeep/statefile"
)

// fakeElector elects when the test grants a term.
type fakeElector struct {
	grants    chan *fakeTerm
	campaigns atomic.Int32
	closed    atomic.Bool

	mu     sync.Mutex
	leader string
}

func newFakeElector() *fakeElector { return &fakeElector{grants: make(chan *fakeTerm)} }

func (f *fakeElector) Campaign(ctx context.Context, value string) (lifecycle.Term, error) {
	f.campaigns.Add(1)
	select {
	case t := <-f.grants:
		f.setLeader(value)
		return t, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (f *fakeElector) Leader(context.Context) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.leader, nil
}

func (f *fakeElector) Close() error { f.closed.Store(true); return nil }

func (f *fakeElector) setLeader(v string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.leader = v
}

// grant elects the campaigning server with a new term.
func (f *fakeElector) grant(t *testing.T, token int64) *fakeTerm {
	t.Helper()
	term := &fakeTerm{f: f, token: token, done: make(chan struct{})}
	term.held.Store(true)
	select {
	case f.grants <- term:
	case <-t.Context().Done():
	}
	return term
}

type fakeTerm struct {
	f        *fakeElector
	token    int64
	held     atomic.Bool
	checks   atomic.Int32
	fail     atomic.Pointer[func(n int32) error] // the error of check number n, if set
	resigned atomic.Bool
	done     chan struct{}
	once     sync.Once
}

func (t *fakeTerm) Held() bool { return t.held.Load() }
func (t *fakeTerm) Check(context.Context) error {
	n := t.checks.Add(1)
	if f := t.fail.Load(); f != nil {
		return (*f)(n)
	}
	if !t.Held() {
		return errors.New("fake: not held")
	}
	return nil
}
func (t *fakeTerm) Done() <-chan struct{} { return t.done }
func (t *fakeTerm) Token() int64          { return t.token }
func (t *fakeTerm) Resign(context.Context) error {
	t.resigned.Store(true)
	t.end()
	t.f.setLeader("")
	return nil
}
func (t *fakeTerm) end() {
	t.held.Store(false)
	t.once.Do(func() { close(t.done) })
}

// notesServer has a tool that changes notes.yaml through Env.Update and
// one that reads it.
func notesServer(env *lifecycle.Env) (*mcp.Server, error) {
	s := mcp.NewServer(&mcp.Implementation{Name: "notes", Version: "v0"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "write", Description: "set notes.yaml"},
		func(ctx context.Context, _ *mcp.CallToolRequest, in struct{ Note string }) (*mcp.CallToolResult, map[string]string, error) {
			hash, err := writeNote(ctx, env, in.Note)
			return nil, map[string]string{"commit": hash}, err
		})
	mcp.AddTool(s, &mcp.Tool{Name: "read", Description: "read notes.yaml"},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, map[string]string, error) {
			b, err := os.ReadFile(filepath.Join(env.ConfigDir, "notes.yaml"))
			return nil, map[string]string{"notes": string(b)}, err
		})
	return s, nil
}

func writeNote(ctx context.Context, env *lifecycle.Env, note string) (string, error) {
	return env.Update(ctx, "note "+note, func(tx *lifecycle.Tx) error {
		return tx.WriteFile("notes.yaml", []byte("notes: ["+note+"]\n"))
	})
}

// call calls tool and returns its text and whether it is an error; a
// JSON-RPC error comes back as err.
func call(t *testing.T, cs *mcp.ClientSession, tool string, args any) (string, bool, error) {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		return "", false, err
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String(), res.IsError, nil
}

func healthz(t *testing.T, st *statefile.State) map[string]any {
	t.Helper()
	body, _ := healthzResp(t, st)
	return body
}

// healthzResp is GET /healthz's body and response.
func healthzResp(t *testing.T, st *statefile.State) (map[string]any, *http.Response) {
	t.Helper()
	url := strings.TrimSuffix(st.HTTP.URL, "/mcp") + "/healthz"
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	var body map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
	return body, resp
}

func postInitialize(t *testing.T, st *statefile.State) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, st.HTTP.URL, strings.NewReader(mcptest.Initialize))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+st.Token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

func (r *running) role(t *testing.T) *statefile.Cluster {
	t.Helper()
	s, err := statefile.Read(r.statePath())
	if err != nil || s.Cluster == nil {
		return &statefile.Cluster{}
	}
	return s.Cluster
}

// TestElectedRoles: a server with an Elector is a standby until elected
// (HTTP 503 with the active writer's URL, /healthz and the state file say
// so), active once elected, and read-only when its term stops holding.
func TestElectedRoles(t *testing.T) {
	fe := newFakeElector()
	opts := httpOptions(t)
	opts.Elector, opts.NewServer = fe, notesServer
	r := run(t, opts)
	st := r.state(t)
	require.NotNil(t, st.Cluster)
	assert.Equal(t, statefile.RoleStandby, st.Cluster.Role)
	h, resp := healthzResp(t, st)
	assert.Equal(t, statefile.RoleStandby, h["role"])
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "a standby's /healthz is 503")
	resp = postInitialize(t, st)
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.Empty(t, resp.Header.Get(lifecycle.ActiveHeader), "no writer known yet")

	other := `{"url":"http://host-b.example:8080/mcp","host":"host-b","pid":7}`
	fe.setLeader(other)
	r.poll(t, "the other writer in the state file", func() bool { return r.role(t).Active == "http://host-b.example:8080/mcp" })
	assert.Equal(t, "host-b", r.role(t).ActiveHost)
	resp = postInitialize(t, st)
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.Equal(t, "http://host-b.example:8080/mcp", resp.Header.Get(lifecycle.ActiveHeader))
	h, resp = healthzResp(t, st)
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.Equal(t, "http://host-b.example:8080/mcp", resp.Header.Get(lifecycle.ActiveHeader))
	assert.Equal(t, "http://host-b.example:8080/mcp", h["active"], "/healthz names the active writer")

	fe.setLeader("")
	term := fe.grant(t, 42)
	r.poll(t, "role active", func() bool { return r.role(t).Role == statefile.RoleActive })
	assert.Equal(t, int64(42), r.role(t).Term)
	assert.Equal(t, st.HTTP.URL, r.role(t).Active, "it advertises the URL it serves")
	h, resp = healthzResp(t, st)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, statefile.RoleActive, h["role"])
	assert.Equal(t, st.HTTP.URL, h["active"])
	assert.Equal(t, http.StatusOK, postInitialize(t, st).StatusCode)

	// Its lease cannot be renewed: reads are served, as a writer cut off.
	term.held.Store(false)
	h, resp = healthzResp(t, st)
	assert.Equal(t, statefile.RoleReadOnly, h["role"], "the role is computed when asked")
	assert.Equal(t, http.StatusOK, resp.StatusCode, "a writer cut off from etcd still serves reads")
	assert.Equal(t, http.StatusOK, postInitialize(t, st).StatusCode)
	r.poll(t, "role readonly in the state file", func() bool { return r.role(t).Role == statefile.RoleReadOnly })

	// The term ends and another writer is elected: a standby again.
	term.end()
	fe.setLeader(other)
	r.poll(t, "role standby", func() bool { return r.role(t).Role == statefile.RoleStandby })
	assert.Equal(t, http.StatusServiceUnavailable, postInitialize(t, st).StatusCode)
	r.poll(t, "a new campaign", func() bool { return fe.campaigns.Load() >= 2 })

	require.NoError(t, r.stop(t))
	assert.True(t, fe.closed.Load(), "Run closes the Elector")
}

// TestElectedFencing: a change is refused before the server is elected,
// made and acknowledged while its term holds (confirmed before and after),
// refused when the term cannot be confirmed, and made but not acknowledged
// when the term is lost during it.
func TestElectedFencing(t *testing.T) {
	fe := newFakeElector()
	opts := options(t)
	opts.Elector, opts.NewServer = fe, notesServer
	r := run(t, opts)

	// A standby: the stdio client's requests get CodeStandby.
	_, _, err := call(t, r.client, "read", nil)
	var rpcErr *jsonrpc.Error
	require.ErrorAs(t, err, &rpcErr)
	assert.EqualValues(t, lifecycle.CodeStandby, rpcErr.Code)
	assert.Contains(t, rpcErr.Message, "standby")
	assert.JSONEq(t, `{"role":"standby","active":""}`, string(rpcErr.Data))

	term := fe.grant(t, 7)
	r.poll(t, "role active", func() bool { return r.role(t).Role == statefile.RoleActive })
	before := term.checks.Load()
	text, isErr, err := call(t, r.client, "write", map[string]string{"Note": "one"})
	require.NoError(t, err)
	require.False(t, isErr, text)
	assert.Equal(t, before+2, term.checks.Load(), "confirmed before the change and before its answer")

	// The lease cannot be confirmed: reads go on, changes are refused.
	term.held.Store(false)
	text, isErr, err = call(t, r.client, "write", map[string]string{"Note": "two"})
	require.NoError(t, err)
	assert.True(t, isErr)
	assert.Contains(t, text, `"note two" refused: this server is not the active writer`)
	text, isErr, err = call(t, r.client, "read", nil)
	require.NoError(t, err)
	assert.False(t, isErr, text)
	assert.Contains(t, text, "one")

	// The term is lost between the change and its answer: the change is
	// committed here but not acknowledged.
	term.held.Store(true)
	base := term.checks.Load()
	lost := func(n int32) error {
		if n > base+1 {
			return errors.New("fake: the claim is gone")
		}
		return nil
	}
	term.fail.Store(&lost)
	text, isErr, err = call(t, r.client, "write", map[string]string{"Note": "three"})
	require.NoError(t, err)
	assert.True(t, isErr)
	assert.Contains(t, text, `"note three" was committed here as`)
	assert.Contains(t, text, "is not acknowledged")
	term.fail.Store(nil)

	require.NoError(t, r.stop(t))
	assert.True(t, term.resigned.Load(), "a clean stop resigns")
	store, err := gitstore.Open(filepath.Join(opts.Home, "config"), nil)
	require.NoError(t, err)
	defer store.Close()
	log, err := store.History("notes.yaml", 10)
	require.NoError(t, err)
	var msgs []string
	for _, c := range log {
		msgs = append(msgs, c.Message)
	}
	assert.Contains(t, msgs, "note one")
	assert.Contains(t, msgs, "note three", "made here, but not acknowledged")
	assert.NotContains(t, msgs, "note two")
}

// TestElectedBeforeActive: BeforeActive runs when elected and before any
// change is let through; an error resigns the term and campaigns again.
func TestElectedBeforeActive(t *testing.T) {
	fe := newFakeElector()
	opts := options(t)
	opts.Elector, opts.NewServer = fe, notesServer
	var calls atomic.Int32
	var duringErr atomic.Pointer[error]
	opts.BeforeActive = func(ctx context.Context, env *lifecycle.Env) error {
		_, err := writeNote(ctx, env, "during")
		duringErr.Store(&err)
		if calls.Add(1) == 1 {
			return errors.New("catching up failed")
		}
		return nil
	}
	r := run(t, opts)
	first := fe.grant(t, 1)
	r.poll(t, "the first term resigned", first.resigned.Load)
	assert.Equal(t, statefile.RoleStandby, r.role(t).Role)
	second := fe.grant(t, 2)
	r.poll(t, "role active", func() bool { return r.role(t).Role == statefile.RoleActive })
	assert.EqualValues(t, 2, calls.Load())
	assert.ErrorIs(t, *duringErr.Load(), lifecycle.ErrNotActive, "no change is made before BeforeActive returns")
	assert.False(t, second.resigned.Load())
	require.NoError(t, r.stop(t))
}

func TestNotActiveError(t *testing.T) {
	cause := errors.New("etcd did not answer")
	for _, tc := range []struct {
		err  *lifecycle.NotActiveError
		want string
	}{
		{&lifecycle.NotActiveError{Change: "c", Role: statefile.RoleStandby, Active: "http://b:1/mcp"},
			`lifecycle: "c" refused: this server is not the active writer of the home (it is a standby); send changes to the active writer at http://b:1/mcp`},
		{&lifecycle.NotActiveError{Change: "c", Role: statefile.RoleReadOnly, Err: cause},
			`lifecycle: "c" refused: this server is not the active writer of the home (it lost the writer's lease and serves reads only until it is the writer again): etcd did not answer; no active writer is known: retry once one is elected (see /healthz or mcpkeep status)`},
		{&lifecycle.NotActiveError{Change: "c", Role: statefile.RoleActive, Commit: "abc", Err: cause},
			`lifecycle: "c" was committed here as abc but is not acknowledged: this server lost the writer's lease before it could answer: etcd did not answer; no active writer is known: retry once one is elected (see /healthz or mcpkeep status)`},
	} {
		assert.Equal(t, tc.want, tc.err.Error())
		assert.ErrorIs(t, tc.err, lifecycle.ErrNotActive)
		if tc.err.Err != nil {
			assert.ErrorIs(t, tc.err, cause)
		}
	}
}

func TestNewChecksAdvertiseURL(t *testing.T) {
	opts := httpOptions(t)
	opts.AdvertiseURL = "http://host-a:8080/mcp"
	_, err := lifecycle.New(opts)
	assert.ErrorContains(t, err, "Options.Elector is nil")
	opts.Elector = newFakeElector()
	_, err = lifecycle.New(opts)
	assert.NoError(t, err)
	opts.AdvertiseURL = "host-a:8080"
	_, err = lifecycle.New(opts)
	assert.ErrorContains(t, err, "is not an http or https URL")
}
