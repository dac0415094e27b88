package mcpserve

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/internal/mcptest"
)

// served is a Serve running for a test.
type served struct {
	url    string // http://127.0.0.1:port
	server *mcp.Server
	stats  *Stats
}

// serveHTTP serves testServer over HTTP with token "tok" and opts' Limits
// and Mode until the test ends.
func serveHTTP(t *testing.T, opts Options) *served {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := &served{url: "http://" + ln.Addr().String(), server: testServer(), stats: new(Stats)}
	opts.Listener, opts.Token, opts.Stats, opts.ShutdownTimeout = ln, "tok", s.stats, time.Second
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, s.server, opts) }()
	t.Cleanup(func() { cancel(); <-done })
	return s
}

// eventually polls cond until it holds, failing t after failAfter.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(failAfter)
	for !cond() {
		if time.Now().After(deadline) {
			require.FailNow(t, "gave up waiting: "+what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// initialized opens a session of version v with a raw client.
func (s *served) initialized(t *testing.T, v string) *rawClient {
	t.Helper()
	c := &rawClient{url: s.url, token: "tok"}
	resp, init := c.call(t, initializeAt(v))
	require.Nil(t, init.Error)
	c.session = resp.Header.Get(sessionHeader)
	require.NotEmpty(t, c.session)
	accepted, _ := c.post(t, mcptest.Initialized)
	require.Equal(t, http.StatusAccepted, accepted.StatusCode)
	return c
}

// stream opens the session's GET event stream; the test's end closes it.
func (c *rawClient) stream(t *testing.T) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, c.url+"/mcp", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set(sessionHeader, c.session)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { resp.Body.Close() })
	require.Equal(t, http.StatusOK, resp.StatusCode)
	return resp
}

// TestSessionExpires: a session no request uses for SessionIdleTimeout is
// closed; its client then gets 404 and can initialize again. The session
// table's clock stands still unless the test moves it, so no session
// expires before the test has used it, however slow the machine.
func TestSessionExpires(t *testing.T) {
	const timeout = 50 * time.Millisecond
	var clock stoppedClock
	s := serveHTTP(t, Options{Limits: Limits{SessionIdleTimeout: timeout}, clock: clock.now})
	c := s.initialized(t, "2025-11-25")
	eventually(t, "the idle session expires", func() bool {
		clock.advance(timeout)
		return s.stats.expired.Load() == 1
	})
	assert.Equal(t, 0, s.stats.Sessions())
	resp, body := c.post(t, rpc(1, "tools/list", map[string]any{}))
	assert.Equal(t, http.StatusNotFound, resp.StatusCode, "%s", body)

	again := s.initialized(t, "2025-11-25")
	_, list := again.call(t, rpc(1, "tools/list", map[string]any{}))
	assert.Nil(t, list.Error)
	assert.EqualValues(t, 1, s.stats.expired.Load(), "the clock did not move: the new session is not idle")
}

// stoppedClock is a clock that moves only by advance.
type stoppedClock struct{ ns atomic.Int64 }

func (c *stoppedClock) now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *stoppedClock) advance(d time.Duration) { c.ns.Add(int64(d)) }

// TestSessionCap: at MaxSessions an initialize closes the session idle
// longest, never a busy one; when every session is busy it gets 503 with
// Retry-After.
func TestSessionCap(t *testing.T) {
	s := serveHTTP(t, Options{Limits: Limits{MaxSessions: 3}})
	a := s.initialized(t, "2025-11-25")
	a.stream(t) // busy while its event stream is open
	b := s.initialized(t, "2025-11-25")
	c := s.initialized(t, "2025-11-25")
	_, list := b.call(t, rpc(1, "tools/list", map[string]any{})) // c is now the idlest
	require.Nil(t, list.Error)

	d := s.initialized(t, "2025-11-25")
	assert.Equal(t, 3, s.stats.Sessions())
	resp, _ := c.post(t, rpc(2, "tools/list", map[string]any{}))
	assert.Equal(t, http.StatusNotFound, resp.StatusCode, "the idlest session was closed")
	for name, live := range map[string]*rawClient{"busy a": a, "b": b, "new d": d} {
		_, list := live.call(t, rpc(3, "tools/list", map[string]any{}))
		assert.Nil(t, list.Error, name)
	}

	b.stream(t)
	d.stream(t)
	full := &rawClient{url: s.url, token: "tok"}
	resp, body := full.post(t, initializeAt("2025-11-25"))
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "%s", body)
	assert.NotEmpty(t, resp.Header.Get("Retry-After"))
	assert.EqualValues(t, 1, s.stats.refused.Load())
	assert.EqualValues(t, 1, s.stats.evicted.Load())
}

// batchOf returns a JSON-RPC batch of n tools/list requests.
func batchOf(n int) string {
	msgs := make([]string, n)
	for i := range msgs {
		msgs[i] = strings.TrimSpace(rpc(100+i, "tools/list", map[string]any{}))
	}
	return "[" + strings.Join(msgs, ",") + "]"
}

// TestSessionVersionGovernsBatches: a session's negotiated version decides
// whether it may send a batch, with or without the version header; a
// 2025-03-26 session's batches are capped in count and answer size.
func TestSessionVersionGovernsBatches(t *testing.T) {
	s := serveHTTP(t, Options{Limits: Limits{MaxBatch: 5, MaxBatchReplyBytes: 2000}})
	for _, header := range []string{"", "2025-03-26"} {
		t.Run("2025-11-25 session, header "+header, func(t *testing.T) {
			c := s.initialized(t, "2025-11-25")
			c.version = header
			resp, body := c.post(t, batchOf(3))
			assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s", body)
			var msg rpcResponse
			require.NoError(t, json.Unmarshal(body, &msg), "a JSON-RPC error: %s", body)
			require.NotNil(t, msg.Error)
			assert.Contains(t, msg.Error.Message, "2025-11-25")
			assert.True(t, resp.Close, "Connection: close")
		})
	}
	t.Run("2025-03-26 session", func(t *testing.T) {
		c := s.initialized(t, "2025-03-26")
		resp, body := c.post(t, batchOf(2))
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
		assert.Equal(t, 2, strings.Count(string(body), `"tools"`), "both answered: %s", body)

		resp, body = c.post(t, batchOf(6))
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "over MaxBatch: %s", body)
		assert.Contains(t, string(body), "more than 5 messages")

		resp, body = c.post(t, batchOf(5))
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
		answered := strings.Count(string(body), `"tools"`)
		assert.Positive(t, answered)
		assert.Less(t, answered, 5, "the answers past MaxBatchReplyBytes are dropped: %s", body)
		assert.LessOrEqual(t, len(body), 2000)
	})
	t.Run("no session", func(t *testing.T) {
		c := &rawClient{url: s.url, token: "tok"}
		resp, body := c.post(t, batchOf(2))
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s", body)
		assert.Contains(t, string(body), "must belong to a session")
	})
}

// TestRefusedBatchHasNullID: every refusal of a batch, an empty one
// included, is a JSON-RPC Invalid Request error with "id": null, as JSON-RPC
// 2.0 requires of an error whose request's id could not be determined.
func TestRefusedBatchHasNullID(t *testing.T) {
	s := serveHTTP(t, Options{Limits: Limits{MaxBatch: 2}})
	for _, tc := range []struct {
		name   string
		client func(t *testing.T) *rawClient
		body   string
	}{
		{"version forbids", func(t *testing.T) *rawClient { return s.initialized(t, "2025-11-25") }, batchOf(1)},
		{"no session", func(*testing.T) *rawClient { return &rawClient{url: s.url, token: "tok"} }, batchOf(1)},
		{"over MaxBatch", func(t *testing.T) *rawClient { return s.initialized(t, "2025-03-26") }, batchOf(3)},
		{"empty", func(t *testing.T) *rawClient { return s.initialized(t, "2025-03-26") }, "[]"},
		{"empty, spaced", func(t *testing.T) *rawClient { return s.initialized(t, "2025-03-26") }, " [ \n ] "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := tc.client(t).post(t, tc.body)
			require.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s", body)
			var msg map[string]json.RawMessage
			require.NoError(t, json.Unmarshal(body, &msg), "a JSON-RPC error: %s", body)
			var rpcErr struct{ Code int }
			require.NoError(t, json.Unmarshal(msg["error"], &rpcErr), "%s", body)
			assert.Equal(t, -32600, rpcErr.Code, "Invalid Request: %s", body)
			id, ok := msg["id"]
			require.True(t, ok, "the error has an id member: %s", body)
			assert.Equal(t, "null", string(id))
		})
	}
}

// TestBatchRefusedUnread: a batch the version forbids is refused from its
// first byte: a body that never ends gets its answer all the same.
func TestBatchRefusedUnread(t *testing.T) {
	s := serveHTTP(t, Options{})
	c := s.initialized(t, "2025-11-25")
	body, w := io.Pipe()
	defer w.Close()
	go w.Write([]byte(`[{"jsonrpc":"2.0","id":1,"method":"tools/list"},`)) // and nothing more
	req := c.request(t, "")
	req.Body, req.ContentLength = body, -1
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	assert.Positive(t, s.stats.batches.Load())
}

// TestUnauthorizedBeforeBody: a request without the token gets 401 without
// the server reading its body: a chunked body that never ends does not
// hold the answer, and the connection is closed after it.
func TestUnauthorizedBeforeBody(t *testing.T) {
	s := serveHTTP(t, Options{})
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.url, "http://"))
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.SetDeadline(time.Now().Add(failAfter)))
	_, err = fmt.Fprintf(conn, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"+
		"Accept: application/json, text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n1\r\n{\r\n", strings.TrimPrefix(s.url, "http://"))
	require.NoError(t, err)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	require.NoError(t, err, "no answer while the body is unfinished")
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	assert.True(t, resp.Close, "Connection: close")
	io.Copy(io.Discard, resp.Body)
	_, err = br.ReadByte()
	assert.Error(t, err, "the server closed the connection")
}

// TestBodyReadTimeout: a POST whose body stalls gets 408 after
// BodyReadTimeout and its connection is closed.
func TestBodyReadTimeout(t *testing.T) {
	s := serveHTTP(t, Options{Limits: Limits{BodyReadTimeout: 50 * time.Millisecond}})
	body, w := io.Pipe()
	defer w.Close()
	go w.Write([]byte(`{"jsonrpc":`))
	c := &rawClient{url: s.url, token: "tok"}
	req := c.request(t, "")
	req.Body, req.ContentLength = body, -1
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	assert.Equal(t, http.StatusRequestTimeout, resp.StatusCode)
}

// closed reports whether the server closed conn: a read gets EOF or a
// reset rather than a timeout.
func closed(conn net.Conn) bool {
	conn.SetReadDeadline(time.Now().Add(time.Millisecond))
	_, err := conn.Read(make([]byte, 1))
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

// TestConnectionTimeouts: a connection that does not finish its headers
// is closed after ReadHeaderTimeout, an idle keep-alive one after
// IdleTimeout; a session's event stream outlives both, and BodyReadTimeout.
func TestConnectionTimeouts(t *testing.T) {
	const short = 50 * time.Millisecond
	s := serveHTTP(t, Options{Limits: Limits{ReadHeaderTimeout: short, IdleTimeout: short, BodyReadTimeout: short,
		SessionIdleTimeout: short}})
	addr := strings.TrimPrefix(s.url, "http://")
	c := s.initialized(t, "2025-11-25")
	events := newEvents(c.stream(t).Body)

	slow, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer slow.Close()
	_, err = io.WriteString(slow, "GET /healthz HTTP/1.1\r\nHost: "+addr+"\r\n") // and no end of headers
	require.NoError(t, err)

	idle, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer idle.Close()
	_, err = io.WriteString(idle, "GET /healthz HTTP/1.1\r\nHost: "+addr+"\r\n\r\n")
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(idle), nil)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	eventually(t, "the slow-header connection is closed", func() bool { return closed(slow) })
	eventually(t, "the idle connection is closed", func() bool { return closed(idle) })

	// The stream was open through all of that, several times every
	// timeout: the server can still send on it, and the session lives.
	var ss *mcp.ServerSession
	for x := range s.server.Sessions() {
		ss = x
	}
	require.NotNil(t, ss)
	go ss.Ping(t.Context(), nil)
	var ping struct{ Method string }
	require.NoError(t, json.Unmarshal(events.next(t), &ping))
	assert.Equal(t, "ping", ping.Method)
	assert.Equal(t, 1, s.stats.Sessions(), "a session with an open stream is not idle")
}

// TestConnectionCap: at MaxConnections a quiet connection is closed to
// make room, so that a client with a request to make gets through: one
// that never sent a request before one idle between requests.
func TestConnectionCap(t *testing.T) {
	s := serveHTTP(t, Options{Limits: Limits{MaxConnections: 4}})
	addr := strings.TrimPrefix(s.url, "http://")
	keepAlive, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer keepAlive.Close()
	kr := bufio.NewReader(keepAlive)
	healthz := func() {
		t.Helper()
		_, err := io.WriteString(keepAlive, "GET /healthz HTTP/1.1\r\nHost: "+addr+"\r\n\r\n")
		require.NoError(t, err)
		resp, err := http.ReadResponse(kr, nil)
		require.NoError(t, err, "the keep-alive connection is still open")
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	healthz() // idle from now on

	var silent []net.Conn
	for range 10 {
		conn, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer conn.Close()
		silent = append(silent, conn)
	}
	eventually(t, "the first silent connections closed", func() bool { return closed(silent[0]) && closed(silent[6]) })
	assert.LessOrEqual(t, s.stats.Connections(), 4)
	c := &rawClient{url: s.url, token: "tok"}
	_, init := c.call(t, initializeAt("2025-11-25"))
	assert.Nil(t, init.Error, "a new client gets through")
	assert.LessOrEqual(t, s.stats.Connections(), 4)
	healthz()
	assert.Positive(t, s.stats.connsClosed.Load())
}

// TestBothKindsOfClient: a go-sdk client of the 2026-07-28 protocol and
// one pinned to 2025-06-18 are both served on /mcp; only the second holds
// a session. ModeSessions makes the first fall back to initialize;
// ModeStateless serves the second without a session.
func TestBothKindsOfClient(t *testing.T) {
	for _, tt := range []struct {
		mode           Mode
		asked, want    string
		wantSession    bool
		sessionsOpened int
	}{
		{ModeBoth, "", "2026-07-28", false, 0},
		{ModeBoth, "2025-06-18", "2025-06-18", true, 1},
		{ModeSessions, "", "2025-11-25", true, 1},
		{ModeStateless, "2025-06-18", "2025-06-18", false, 0},
		{ModeStateless, "", "2026-07-28", false, 0},
	} {
		t.Run(fmt.Sprintf("mode %d asks %q", tt.mode, tt.asked), func(t *testing.T) {
			s := serveHTTP(t, Options{Mode: tt.mode})
			client := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "v0"}, nil)
			cs, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: s.url + "/mcp",
				HTTPClient: &http.Client{Transport: mcptest.Bearer{Token: "tok"}}}, &mcp.ClientSessionOptions{ProtocolVersion: tt.asked})
			require.NoError(t, err)
			defer cs.Close()
			assert.Equal(t, tt.want, cs.InitializeResult().ProtocolVersion)
			assert.Equal(t, tt.wantSession, cs.ID() != "", "session ID %q", cs.ID())
			res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "slow_echo", Arguments: map[string]int{"n": 3}})
			require.NoError(t, err)
			assert.JSONEq(t, `{"n":3}`, mustJSON(t, res.StructuredContent))
			assert.EqualValues(t, tt.sessionsOpened, s.stats.opened.Load())
		})
	}
}

// TestShutdownWithListenStream: a 2026-07-28 client's subscriptions/listen
// stream is not a call in flight: shutdown does not wait for it until
// ShutdownTimeout, which it logs when it has to.
func TestShutdownWithListenStream(t *testing.T) {
	var log warnings
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	server := testServer()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, server, Options{Listener: ln, Token: "tok", ShutdownTimeout: 2 * time.Second, Logger: slog.New(&log)})
	}()
	client := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "v0"},
		&mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {}})
	cs, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: "http://" + ln.Addr().String() + "/mcp",
		HTTPClient: &http.Client{Transport: mcptest.Bearer{Token: "tok"}}}, nil)
	require.NoError(t, err)
	defer cs.Close()
	require.Equal(t, "2026-07-28", cs.InitializeResult().ProtocolVersion)
	eventually(t, "the listen stream open", func() bool {
		n := 0
		for range server.Sessions() {
			n++
		}
		return n > 0
	})

	cancel()
	select {
	case err := <-done:
		assert.NoError(t, err)
	case <-time.After(failAfter):
		t.Fatal("Serve hung on shutdown with a listen stream open")
	}
	assert.NotContains(t, log.messages(), "HTTP shutdown: calls still in flight at the deadline")
}

// TestStdioShutdownWithListenStream: on stdio too, a 2026-07-28 client's
// subscriptions/listen stream is not a call the shutdown drains: with a
// ShutdownTimeout of an hour, a shutdown that waited for it would hang.
func TestStdioShutdownWithListenStream(t *testing.T) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	server := testServer()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, server, Options{Stdio: true, Stdin: inR, Stdout: outW, ShutdownTimeout: time.Hour})
		outW.Close()
	}()
	t.Cleanup(func() { inW.Close(); outR.Close() })
	client := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "v0"},
		&mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {}})
	cs, err := client.Connect(t.Context(), &mcp.IOTransport{Reader: outR, Writer: inW}, nil)
	require.NoError(t, err)
	require.Equal(t, "2026-07-28", cs.InitializeResult().ProtocolVersion)
	_, err = cs.ListTools(t.Context(), nil)
	require.NoError(t, err, "the listen request was read before this call")

	cancel()
	select {
	case err := <-done:
		assert.NoError(t, err)
	case <-time.After(failAfter):
		t.Fatal("Serve waited for the listen stream at shutdown")
	}
}

// TestLogStats: one Info line per interval in which something happened,
// with that interval's counts, and none for a quiet interval.
func TestLogStats(t *testing.T) {
	var buf mcptest.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	stats := new(Stats)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { logStats(ctx, stats, log, 10*time.Millisecond); close(done) }()
	stats.opened.Add(3)
	stats.expired.Add(1)
	stats.sessions.Add(2)
	eventually(t, "a line for the sessions opened", func() bool { return strings.Contains(buf.String(), "opened=3") })
	cancel()
	<-done
	out := buf.String()
	assert.Equal(t, 1, strings.Count(out, "\n"), "quiet intervals write nothing: %s", out)
	assert.Contains(t, out, "level=INFO msg=\"HTTP sessions\"")
	assert.Contains(t, out, "expired=1")
	assert.Contains(t, out, "live_sessions=2")
}
