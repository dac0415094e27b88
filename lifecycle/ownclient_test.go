package lifecycle_test

import (
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/internal/mcptest"
	"github.com/mcpkeep/mcpkeep/lifecycle"
	"github.com/mcpkeep/mcpkeep/statefile"
)

// protocols are the ways a client names itself: in initialize (up to
// 2025-11-25), or in each request's _meta (2026-07-28, the go-sdk
// client's default).
var protocols = []string{"2025-11-25", ""}

// TestRunRecordsOwnClient: the writer names its own stdio client, as the
// client named itself, in the state file and the registry entry, which
// does not count it among the attached sessions. Neither an attached
// client nor an HTTP client is taken for it.
func TestRunRecordsOwnClient(t *testing.T) {
	for _, version := range protocols {
		t.Run("protocol="+version, func(t *testing.T) { testRunRecordsOwnClient(t, version) })
	}
}

func testRunRecordsOwnClient(t *testing.T, version string) {
	sopts := &mcp.ClientSessionOptions{ProtocolVersion: version}
	opts := options(t)
	opts.HTTP = "127.0.0.1:0"
	before := time.Now().Truncate(time.Millisecond)
	writer := runAs(t, opts, &mcp.Implementation{Name: "claude-code", Version: "1.2.3"}, nil, sopts)
	after := time.Now()
	writer.poll(t, "the own client in the state file", func() bool {
		s, err := statefile.Read(writer.statePath())
		return err == nil && s.Client != nil
	})
	st := writer.state(t)
	assert.Equal(t, "claude-code", st.Client.Name)
	assert.Equal(t, "1.2.3", st.Client.Version)
	assert.False(t, st.Client.Since.Before(before), "since %v, before %v", st.Client.Since, before)
	assert.False(t, st.Client.Since.After(after), "since %v, after %v", st.Client.Since, after)

	// An HTTP client, then an attached one, initialize; the attached
	// session rewrites the state file.
	require.NotNil(t, st.HTTP)
	web, err := mcp.NewClient(&mcp.Implementation{Name: "web", Version: "9"}, nil).Connect(t.Context(),
		&mcp.StreamableClientTransport{Endpoint: st.HTTP.URL, HTTPClient: &http.Client{Transport: mcptest.Bearer{Token: st.Token}}}, sopts)
	require.NoError(t, err)
	defer web.Close()
	mcptest.Call[lifecycle.Route](t, web, "route", nil)
	second := runAs(t, writer.opts, &mcp.Implementation{Name: "cursor", Version: "0.9"}, nil, sopts)
	assert.True(t, mcptest.Call[lifecycle.Route](t, second.client, "route", nil).Attached)
	writer.poll(t, "the attached session in the state file", func() bool {
		s, err := statefile.Read(writer.statePath())
		return err == nil && len(s.Sessions) == 1 && s.Sessions[0].Client == "cursor"
	})
	st = writer.state(t)
	require.NotNil(t, st.Client)
	assert.Equal(t, "claude-code", st.Client.Name, "the own client is the stdio one")
	writer.poll(t, "the attached session in the registry", func() bool {
		entries, err := statefile.NewRegistry(writer.opts.Registry).List()
		return err == nil && len(entries) == 1 && entries[0].Sessions == 1
	})
	entries, err := statefile.NewRegistry(writer.opts.Registry).List()
	require.NoError(t, err)
	require.NotNil(t, entries[0].State.Client)
	assert.Equal(t, "claude-code", entries[0].State.Client.Name)
	assert.Equal(t, 1, entries[0].Sessions, "the own client is not counted")
}

// TestRunRecordsOwnClientOnTakeover: a process that takes over as the
// writer names its own client, which reaches it through its forwarder,
// with the time it first initialized.
func TestRunRecordsOwnClientOnTakeover(t *testing.T) {
	for _, version := range protocols {
		t.Run("protocol="+version, func(t *testing.T) { testRunRecordsOwnClientOnTakeover(t, version) })
	}
}

func testRunRecordsOwnClientOnTakeover(t *testing.T, version string) {
	first := run(t, options(t))
	before := time.Now().Truncate(time.Millisecond)
	second := runAs(t, first.opts, &mcp.Implementation{Name: "zed", Version: "0.200.1"}, nil, &mcp.ClientSessionOptions{ProtocolVersion: version})
	assert.True(t, mcptest.Call[lifecycle.Route](t, second.client, "route", nil).Attached)
	stopped := time.Now()

	require.NoError(t, first.stop(t))
	assert.False(t, mcptest.Call[lifecycle.Route](t, second.client, "route", nil).Attached, "it took over")
	second.poll(t, "the new writer's own client in the state file", func() bool {
		s, err := statefile.Read(second.statePath())
		return err == nil && s.PID != 0 && s.Status == statefile.StatusReady && s.Client != nil
	})
	st := second.state(t)
	assert.Equal(t, "zed", st.Client.Name)
	assert.Equal(t, "0.200.1", st.Client.Version)
	assert.False(t, st.Client.Since.Before(before), "since %v, before %v", st.Client.Since, before)
	assert.True(t, st.Client.Since.Before(stopped), "since %v: the first initialize, not the replay after %v", st.Client.Since, stopped)
	assert.Empty(t, st.Sessions)
}

// TestRunNoStdioNoOwnClient: a server without stdio has no own client.
func TestRunNoStdioNoOwnClient(t *testing.T) {
	opts := options(t)
	opts.NoStdio = true
	opts.HTTP = "127.0.0.1:0"
	r := run(t, opts)
	st := r.state(t)
	web, err := mcp.NewClient(&mcp.Implementation{Name: "web", Version: "9"}, nil).Connect(t.Context(),
		&mcp.StreamableClientTransport{Endpoint: st.HTTP.URL, HTTPClient: &http.Client{Transport: mcptest.Bearer{Token: st.Token}}}, nil)
	require.NoError(t, err)
	defer web.Close()
	mcptest.Call[lifecycle.Route](t, web, "route", nil)
	assert.Nil(t, r.state(t).Client)
}

// TestRunOwnClientNotHTTP: an HTTP client that initializes before the
// stdio client is not taken for the server's own.
func TestRunOwnClientNotHTTP(t *testing.T) {
	opts := options(t)
	opts.HTTP = "127.0.0.1:0"
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	opts.Stdin, opts.Stdout = inR, outW
	h, err := lifecycle.New(opts)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() {
		err := h.Run(t.Context())
		inR.CloseWithError(err)
		outW.CloseWithError(err)
		done <- err
	}()
	defer func() {
		inW.Close()
		select {
		case err := <-done:
			assert.NoError(t, err)
		case <-time.After(hangAfter):
			t.Errorf("Run did not return within %v", hangAfter)
		}
	}()
	r := &running{opts: opts, done: done}
	r.poll(t, "a ready state file", func() bool {
		s, err := statefile.Read(r.statePath())
		return err == nil && s.Status == statefile.StatusReady
	})
	st := r.state(t)
	web, err := mcp.NewClient(&mcp.Implementation{Name: "web", Version: "9"}, nil).Connect(t.Context(),
		&mcp.StreamableClientTransport{Endpoint: st.HTTP.URL, HTTPClient: &http.Client{Transport: mcptest.Bearer{Token: st.Token}}}, nil)
	require.NoError(t, err)
	defer web.Close()
	mcptest.Call[lifecycle.Route](t, web, "route", nil)

	// An attached session rewrites the state file, with the own client
	// if the HTTP client were taken for it.
	second := runAs(t, opts, &mcp.Implementation{Name: "cursor", Version: "0.9"}, nil, nil)
	mcptest.Call[lifecycle.Route](t, second.client, "route", nil)
	r.poll(t, "the attached session in the state file", func() bool {
		s, err := statefile.Read(r.statePath())
		return err == nil && len(s.Sessions) == 1 && s.Sessions[0].Client == "cursor"
	})
	assert.Nil(t, r.state(t).Client, "no own client yet")
	require.NoError(t, second.stop(t))

	own, err := mcp.NewClient(&mcp.Implementation{Name: "own", Version: "1"}, nil).Connect(t.Context(),
		&mcp.IOTransport{Reader: io.NopCloser(outR), Writer: inW}, nil)
	require.NoError(t, err)
	mcptest.Call[lifecycle.Route](t, own, "route", nil)
	r.poll(t, "the own client in the state file", func() bool {
		s, err := statefile.Read(r.statePath())
		return err == nil && s.Client != nil && s.Client.Name == "own"
	})
}
