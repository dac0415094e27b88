package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/internal/mcptest"
	"github.com/mcpkeep/mcpkeep/statefile"
)

// The hostile-HTTP suite: each attack runs against its own built helios,
// on 127.0.0.1, with its limits set short through the --http-* flags,
// while two well-behaved clients (one with a 2025-11-25 session, one of
// the 2026-07-28 protocol) call tools throughout. Every loop is bounded in
// count, and every wait by hangAfter. Timing is measured and logged for
// RELIABILITY.md, never asserted; what is asserted is what the attacker
// got, that the well-behaved clients saw no error and lost no
// acknowledged write, and the server's memory and file descriptors.
//
// go test -run TestHostile -v ./cmd/helios prints the figures.

// target is a helios under attack.
type target struct {
	*server
	st   *statefile.State
	addr string // host:port
	good *goodClients
}

// attack starts helios with HTTP only and flags, and the well-behaved
// clients. The test defers done, which stops and checks them while
// helios still runs.
func attack(t *testing.T, flags ...string) *target {
	t.Helper()
	args := append([]string{"--http", "127.0.0.1:0", "--no-stdio"}, flags...)
	s := start(t, filepath.Join(t.TempDir(), "home"), filepath.Join(t.TempDir(), "servers.json"), args...)
	st := s.ready(t)
	tg := &target{server: s, st: st, addr: strings.TrimSuffix(strings.TrimPrefix(st.HTTP.URL, "http://"), "/mcp")}
	tg.good = startGood(t, st)
	return tg
}

// done lets each well-behaved client make goodCallsAfter more calls with
// the attack's leftovers still in place, then stops them and checks what
// they saw.
func (tg *target) done(t *testing.T) {
	counts := tg.good.snapshot()
	tg.poll(t, "the well-behaved clients' calls after the attack", func() bool {
		now := tg.good.snapshot()
		return len(tg.good.errors()) > 0 || (now[0] >= counts[0]+goodCallsAfter && now[1] >= counts[1]+goodCallsAfter)
	})
	tg.good.finish(t)
}

// goodCallsAfter is how many calls each well-behaved client makes after
// an attack, before the test ends.
const goodCallsAfter = 10

// figures is what /proc says of the server.
type figures struct{ rssKiB, hwmKiB, fds int }

func (f figures) String() string {
	return fmt.Sprintf("RSS %.1f MiB (peak %.1f), %d fds", float64(f.rssKiB)/1024, float64(f.hwmKiB)/1024, f.fds)
}

func (tg *target) figures(t *testing.T) figures {
	t.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", tg.Pid()))
	require.NoError(t, err)
	var f figures
	for line := range strings.SplitSeq(string(status), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 2 {
			continue
		}
		switch fields[0] {
		case "VmRSS:":
			f.rssKiB, _ = strconv.Atoi(fields[1])
		case "VmHWM:":
			f.hwmKiB, _ = strconv.Atoi(fields[1])
		}
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", tg.Pid()))
	require.NoError(t, err)
	f.fds = len(fds)
	return f
}

// healthz returns the live counts of /healthz.
func (tg *target) healthz(t *testing.T) (sessions, connections int) {
	t.Helper()
	resp, err := http.Get("http://" + tg.addr + "/healthz")
	require.NoError(t, err)
	defer resp.Body.Close()
	var body struct {
		HTTP struct{ Sessions, Connections int }
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
	return body.HTTP.Sessions, body.HTTP.Connections
}

// dial opens a raw connection the test's end closes.
func (tg *target) dial(t *testing.T) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", tg.addr)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return conn
}

// initialize POSTs an initialize of version v with the token and returns
// the session ID.
func (tg *target) initialize(client *http.Client, v string) (string, error) {
	resp, err := tg.post(client, "", "", fmt.Sprintf(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":%q,"capabilities":{},"clientInfo":{"name":"abandoned","version":"0"}}}`, v))
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("initialize: %s", resp.Status)
	}
	return resp.Header.Get("Mcp-Session-Id"), nil
}

// post POSTs body in session (or none) with the version header v (or
// none) and the token, and reads the answer.
func (tg *target) post(client *http.Client, session, v, body string) (*http.Response, error) {
	req, err := http.NewRequest(http.MethodPost, tg.st.HTTP.URL, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+tg.st.Token)
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	if v != "" {
		req.Header.Set("Mcp-Protocol-Version", v)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body)
	return resp, err
}

// goodClients are two well-behaved clients working on the server from
// startGood until the test's end: each writes a preference of its own,
// then reads it back, over and over. The end checks that no call failed
// and that every write they were told was done is there.
type goodClients struct {
	st     *statefile.State
	ctx    context.Context
	cancel context.CancelFunc
	stop   chan struct{}
	wg     sync.WaitGroup
	calls  atomic.Int64
	mu     sync.Mutex
	errs   []error
	acked  map[string]string // key -> value of every acknowledged write
	counts map[string]int    // calls per client
}

func startGood(t *testing.T, st *statefile.State) *goodClients {
	g := &goodClients{st: st, stop: make(chan struct{}), acked: map[string]string{}, counts: map[string]int{}}
	// Not t.Context(): that ends before a deferred finish.
	g.ctx, g.cancel = context.WithCancel(context.Background())
	for _, version := range []string{"2025-11-25", "2026-07-28"} {
		client := mcp.NewClient(&mcp.Implementation{Name: "good-" + version, Version: "v0"}, nil)
		cs, err := client.Connect(g.ctx, &mcp.StreamableClientTransport{Endpoint: st.HTTP.URL,
			HTTPClient: &http.Client{Transport: mcptest.Bearer{Token: st.Token, Base: &http.Transport{}}}},
			&mcp.ClientSessionOptions{ProtocolVersion: version})
		require.NoError(t, err)
		require.Equal(t, version, cs.InitializeResult().ProtocolVersion)
		_, err = cs.CallTool(g.ctx, &mcp.CallToolParams{Name: "get_persona"}) // working before the attack
		require.NoError(t, err)
		g.wg.Go(func() { g.work(g.ctx, "good"+strings.ReplaceAll(version, "-", ""), cs) })
	}
	return g
}

// goodCallLimit bounds each well-behaved client's loop.
const goodCallLimit = 100_000

func (g *goodClients) work(ctx context.Context, name string, cs *mcp.ClientSession) {
	defer cs.Close()
	fail := func(err error) {
		g.mu.Lock()
		g.errs = append(g.errs, fmt.Errorf("%s: %w", name, err))
		g.mu.Unlock()
	}
	for i := range goodCallLimit {
		select {
		case <-g.stop:
			return
		default:
		}
		key, value := fmt.Sprintf("%s-%d", name, i/8), strconv.Itoa(i)
		if i%8 == 0 { // mostly reads, as clients do
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "update_preference", Arguments: map[string]any{"key": key, "value": value}})
			if err != nil || res.IsError {
				fail(fmt.Errorf("update_preference %s: %v %v", key, err, res))
				return
			}
			g.mu.Lock()
			g.acked[key] = value
			g.mu.Unlock()
		}
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "get_persona"})
		if err != nil || res.IsError {
			fail(fmt.Errorf("get_persona: %v %v", err, res))
			return
		}
		g.calls.Add(1)
		g.mu.Lock()
		g.counts[name]++
		g.mu.Unlock()
	}
}

// snapshot returns the calls each client made so far.
func (g *goodClients) snapshot() [2]int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return [2]int{g.counts["good20251125"], g.counts["good20260728"]}
}

func (g *goodClients) errors() []error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.errs
}

// finish stops the clients and checks what they saw.
func (g *goodClients) finish(t *testing.T) {
	close(g.stop)
	g.wg.Wait()
	defer g.cancel()
	assert.Empty(t, g.errs, "a well-behaved client's call failed")
	assert.Len(t, g.counts, 2, "both well-behaved clients made calls: %v", g.counts)
	client := mcp.NewClient(&mcp.Implementation{Name: "check", Version: "v0"}, nil)
	cs, err := client.Connect(g.ctx, &mcp.StreamableClientTransport{Endpoint: g.st.HTTP.URL,
		HTTPClient: &http.Client{Transport: mcptest.Bearer{Token: g.st.Token}}}, nil)
	require.NoError(t, err)
	defer cs.Close()
	var p struct{ Preferences map[string]string }
	res, err := cs.CallTool(g.ctx, &mcp.CallToolParams{Name: "get_persona"})
	require.NoError(t, err)
	b, _ := json.Marshal(res.StructuredContent)
	require.NoError(t, json.Unmarshal(b, &p))
	for k, v := range g.acked {
		assert.Equal(t, v, p.Preferences[k], "acknowledged write %s lost", k)
	}
	t.Logf("well-behaved clients: %v calls, 0 errors, %d acknowledged writes all present", g.counts, len(g.acked))
}

// scale is n, or n/10 with -short.
func scale(n int) int {
	if testing.Short() {
		return n / 10
	}
	return n
}

// TestHostileAbandonedSessions: sessions initialized and never deleted
// expire, and the memory they held is given back.
func TestHostileAbandonedSessions(t *testing.T) {
	tg := attack(t, "--http-session-idle", "5s", "--http-max-sessions", "5000")
	defer tg.done(t)
	before := tg.figures(t)
	n := scale(2000)
	var wg sync.WaitGroup
	var failed atomic.Int64
	next := atomic.Int64{}
	for range 8 {
		wg.Go(func() {
			client := &http.Client{Transport: &http.Transport{}}
			defer client.CloseIdleConnections()
			for next.Add(1) <= int64(n) {
				if _, err := tg.initialize(client, "2025-11-25"); err != nil {
					failed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	require.Zero(t, failed.Load(), "initializes refused")
	peak := tg.figures(t)
	sessions, _ := tg.healthz(t)
	t.Logf("%d abandoned sessions: %d live just after; %s", n, sessions, peak)

	tg.poll(t, "the abandoned sessions expired", func() bool {
		s, _ := tg.healthz(t)
		return s <= 1 // the well-behaved 2025-11-25 client's
	})
	tg.poll(t, "RSS back within 10 MiB of the start", func() bool {
		return tg.figures(t).rssKiB <= before.rssKiB+10*1024
	})
	after := tg.figures(t)
	t.Logf("before %s; after expiry %s", before, after)
	lines := strings.Count(tg.Stderr(), "\n")
	assert.Less(t, lines, 20, "per-session lines are Debug: %d lines of log for %d sessions", lines, n)
}

// TestHostileSessionCap: at the cap, the idlest sessions are closed to
// make room, never a busy one.
func TestHostileSessionCap(t *testing.T) {
	const cap = 20
	tg := attack(t, "--http-max-sessions", strconv.Itoa(cap))
	defer tg.done(t)
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()

	// A session with its event stream open is busy the whole time.
	busy, err := tg.initialize(client, "2025-11-25")
	require.NoError(t, err)
	streamReq, err := http.NewRequestWithContext(t.Context(), http.MethodGet, tg.st.HTTP.URL, nil)
	require.NoError(t, err)
	streamReq.Header.Set("Authorization", "Bearer "+tg.st.Token)
	streamReq.Header.Set("Accept", "text/event-stream")
	streamReq.Header.Set("Mcp-Session-Id", busy)
	stream, err := http.DefaultClient.Do(streamReq)
	require.NoError(t, err)
	defer stream.Body.Close()
	require.Equal(t, http.StatusOK, stream.StatusCode)

	before := tg.figures(t)
	n := scale(1000)
	ids := make([]string, 0, n)
	maxSeen := 0
	for range n {
		id, err := tg.initialize(client, "2025-11-25")
		require.NoError(t, err, "an initialize at the cap closes an idle session instead of failing")
		ids = append(ids, id)
		s, _ := tg.healthz(t)
		maxSeen = max(maxSeen, s)
	}
	assert.LessOrEqual(t, maxSeen, cap)
	list := `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	for name, id := range map[string]string{"busy": busy, "newest": ids[len(ids)-1]} {
		resp, err := tg.post(client, id, "2025-11-25", list)
		require.NoError(t, err)
		assert.Equal(t, http.StatusOK, resp.StatusCode, "the %s session lives", name)
	}
	resp, err := tg.post(client, ids[0], "2025-11-25", list)
	require.NoError(t, err)
	assert.Equal(t, http.StatusNotFound, resp.StatusCode, "the idlest session was closed")
	t.Logf("%d initializes at a cap of %d: all answered, at most %d live, oldest idle ones 404, busy one kept; before %s, after %s",
		n, cap, maxSeen, before, tg.figures(t))
}

// drip sends msg on conn one byte every pace and reports when the server
// closed the connection, or that it never did before msg was sent whole.
func drip(conn net.Conn, msg string, pace time.Duration) (closedAfter time.Duration, err error) {
	start := time.Now()
	buf := make([]byte, 1)
	for i := range len(msg) {
		if _, err := conn.Write([]byte{msg[i]}); err != nil {
			return time.Since(start), nil // closed under us
		}
		conn.SetReadDeadline(time.Now().Add(pace))
		_, err := conn.Read(buf)
		var ne net.Error
		switch {
		case errors.As(err, &ne) && ne.Timeout():
			continue
		case err != nil:
			return time.Since(start), nil
		}
	}
	return 0, errors.New("the server let the whole message through")
}

// TestHostileSlowHeaders: connections that drip their headers a byte at a
// time are closed after the header timeout, before they finish.
func TestHostileSlowHeaders(t *testing.T) {
	tg := attack(t, "--http-header-timeout", "500ms", "--http-max-conns", "2000")
	defer tg.done(t)
	before := tg.figures(t)
	n := scale(300)
	header := "GET /healthz HTTP/1.1\r\nHost: " + tg.addr + "\r\nUser-Agent: slow\r\nX-Pad: " + strings.Repeat("x", 40) + "\r\n\r\n"
	conns := make([]net.Conn, n)
	for i := range conns {
		conns[i] = tg.dial(t)
	}
	during := tg.figures(t)
	var wg sync.WaitGroup
	times := make([]time.Duration, n)
	errs := make([]error, n)
	for i, conn := range conns {
		wg.Go(func() { times[i], errs[i] = drip(conn, header, 100*time.Millisecond) })
	}
	wg.Wait()
	var longest time.Duration
	for i := range n {
		require.NoError(t, errs[i], "connection %d", i)
		longest = max(longest, times[i])
	}
	tg.poll(t, "the server's descriptors back", func() bool { return tg.figures(t).fds <= before.fds+2 })
	t.Logf("%d slow-header connections (1 byte per 100 ms, %d bytes to send): all closed unfinished, the last after %v; before %s, with them open %s, after %s",
		n, len(header), longest.Round(10*time.Millisecond), before, during, tg.figures(t))
}

// TestHostileIdleConnections: keep-alive connections left idle are closed
// after the idle timeout.
func TestHostileIdleConnections(t *testing.T) {
	tg := attack(t, "--http-idle-timeout", "1s", "--http-max-conns", "2000")
	defer tg.done(t)
	before := tg.figures(t)
	n := scale(1000)
	conns := make([]net.Conn, n)
	readers := make([]*bufio.Reader, n)
	for i := range conns {
		conns[i] = tg.dial(t)
		readers[i] = bufio.NewReader(conns[i])
		_, err := io.WriteString(conns[i], "GET /healthz HTTP/1.1\r\nHost: "+tg.addr+"\r\n\r\n")
		require.NoError(t, err)
	}
	for i := range conns {
		resp, err := http.ReadResponse(readers[i], nil)
		require.NoError(t, err)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	during := tg.figures(t)
	_, open := tg.healthz(t)
	start := time.Now()
	var wg sync.WaitGroup
	closedAfter := make([]time.Duration, n)
	for i, conn := range conns {
		wg.Go(func() {
			conn.SetReadDeadline(time.Now().Add(hangAfter))
			_, err := readers[i].ReadByte()
			var ne net.Error
			if err != nil && !(errors.As(err, &ne) && ne.Timeout()) {
				closedAfter[i] = time.Since(start)
			}
		})
	}
	wg.Wait()
	var longest time.Duration
	for i := range n {
		require.NotZero(t, closedAfter[i], "idle connection %d still open after %v", i, hangAfter)
		longest = max(longest, closedAfter[i])
	}
	tg.poll(t, "the server's descriptors back", func() bool { return tg.figures(t).fds <= before.fds+2 })
	t.Logf("%d idle keep-alive connections (%d open by /healthz): all closed by the server, the last %v after they went idle; before %s, with them open %s, after %s",
		n, open, longest.Round(10*time.Millisecond), before, during, tg.figures(t))
}

// TestHostileConnectionCap: more connections than the cap that send
// nothing cannot keep a client with a request from getting through.
func TestHostileConnectionCap(t *testing.T) {
	const cap = 64
	tg := attack(t, "--http-max-conns", strconv.Itoa(cap), "--http-header-timeout", "10s")
	defer tg.done(t)
	before := tg.figures(t)
	n := scale(1000)
	for range n {
		tg.dial(t)
	}
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	_, err := tg.initialize(client, "2025-11-25")
	require.NoError(t, err, "a new client gets through")
	_, open := tg.healthz(t)
	assert.LessOrEqual(t, open, cap)
	during := tg.figures(t)
	assert.LessOrEqual(t, during.fds, before.fds+cap)
	t.Logf("%d silent connections at a cap of %d: %d open on the server, a new client served; before %s, during %s",
		n, cap, open, before, during)
}

// TestHostileUnauthorizedSlowBody: a POST without the token whose chunked
// body drips gets 401 at once, and its connection closed.
func TestHostileUnauthorizedSlowBody(t *testing.T) {
	tg := attack(t)
	defer tg.done(t)
	conn := tg.dial(t)
	require.NoError(t, conn.SetDeadline(time.Now().Add(hangAfter)))
	start := time.Now()
	_, err := fmt.Fprintf(conn, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"+
		"Accept: application/json, text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n1\r\n{\r\n", tg.addr)
	require.NoError(t, err)
	// More body, a byte a second, until the answer; it never ends.
	var wg sync.WaitGroup
	wg.Go(func() {
		for range 60 {
			if _, err := io.WriteString(conn, "1\r\n \r\n"); err != nil {
				return
			}
			time.Sleep(time.Second) // the attacker's pace
		}
	})
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	require.NoError(t, err)
	took := time.Since(start)
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	assert.True(t, resp.Close)
	io.Copy(io.Discard, resp.Body)
	_, err = br.ReadByte()
	assert.Error(t, err, "the connection is closed after the 401")
	conn.Close()
	wg.Wait()
	t.Logf("no-token POST with a never-ending chunked body: 401 after %v, connection closed; %s", took.Round(time.Millisecond), tg.figures(t))
}

// TestHostileBatchWithoutHeader: a batch on a 2025-11-25 session without
// the version header is refused with a JSON-RPC error before it is read;
// four at the body limit at once do not grow the server's memory.
func TestHostileBatchWithoutHeader(t *testing.T) {
	tg := attack(t)
	defer tg.done(t)
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	session, err := tg.initialize(client, "2025-11-25")
	require.NoError(t, err)
	var batch bytes.Buffer
	batch.WriteString("[")
	for i := 0; batch.Len() < 4<<20-200; i++ {
		if i > 0 {
			batch.WriteString(",")
		}
		fmt.Fprintf(&batch, `{"jsonrpc":"2.0","id":%d,"method":"tools/list"}`, i)
	}
	batch.WriteString("]")
	before := tg.figures(t)
	var wg sync.WaitGroup
	answers := make([]string, 4)
	for i := range answers {
		wg.Go(func() {
			conn, err := net.Dial("tcp", tg.addr)
			if err != nil {
				answers[i] = err.Error()
				return
			}
			defer conn.Close()
			conn.SetDeadline(time.Now().Add(hangAfter))
			go func() {
				fmt.Fprintf(conn, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"+
					"Authorization: Bearer %s\r\nMcp-Session-Id: %s\r\nContent-Length: %d\r\n\r\n", tg.addr, tg.st.Token, session, batch.Len())
				conn.Write(batch.Bytes()) // fails once the server closes: it does not read it
			}()
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				answers[i] = err.Error()
				return
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			answers[i] = resp.Status + " " + string(body)
		})
	}
	wg.Wait()
	after := tg.figures(t)
	for _, a := range answers {
		assert.True(t, strings.HasPrefix(a, "400 "), "%s", a)
		assert.Contains(t, a, `"error":{"code":-32600`, "a JSON-RPC error")
	}
	grew := after.hwmKiB - before.rssKiB
	assert.LessOrEqual(t, grew, 5*1024, "peak RSS grew %d KiB", grew)
	resp, err := tg.post(client, session, "", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, resp.StatusCode, "the session goes on")
	t.Logf("4 concurrent %.1f MiB batches without the header on a 2025-11-25 session: refused (%s); before %s, after %s (peak +%d KiB over the RSS before)",
		float64(batch.Len())/(1<<20), strings.SplitN(answers[0], "\n", 2)[0], before, after, grew)
}
