package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptrace"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/crashtest"
	"github.com/mcpkeep/mcpkeep/internal/mcptest"
	"github.com/mcpkeep/mcpkeep/internal/testserver/etcdtest"
	"github.com/mcpkeep/mcpkeep/lifecycle"
	"github.com/mcpkeep/mcpkeep/statefile"
)

// etcdTTL is the writer's lease in these tests: short, for quick
// failovers, and long enough that a loaded machine renews it in time
// (every third of it).
const etcdTTL = 2 * time.Second

// host is one helios on a "host" of its own: its own HOME, home and
// registry, HTTP on 127.0.0.1:0, the writer elected through etcd.
type host struct {
	*server
	name string
	st   *statefile.State
}

// startHost starts helios as host name of the cluster at etcdURL and
// waits for its state file (a standby's state file is ready too).
func startHost(t *testing.T, name, etcdURL string) *host {
	t.Helper()
	return startHostArmed(t, name, etcdURL, "")
}

// startHostArmed is startHost with failpoints armed.
func startHostArmed(t *testing.T, name, etcdURL, failpoints string) *host {
	t.Helper()
	h, err := startHostNoCleanup(t, t.TempDir(), name, etcdURL, failpoints)
	require.NoError(t, err)
	t.Cleanup(h.stop)
	h.st = h.ready(t)
	return h
}

// startHostNoCleanup starts host name under root/name, with the flags
// extra after the cluster's.
func startHostNoCleanup(t testing.TB, root, name, etcdURL, failpoints string, extra ...string) (*host, error) {
	dir := filepath.Join(root, name)
	home, registry := filepath.Join(dir, ".helios"), filepath.Join(dir, "servers.json")
	p, err := crashtest.Start(t.Context(), crashtest.Cmd{
		Path: heliosBin,
		Args: append([]string{"--home", home, "--registry", registry, "--http", "127.0.0.1:0", "--no-stdio",
			"--etcd", etcdURL, "--etcd-ttl", etcdTTL.String()}, extra...),
		Env:        []string{"HOME=" + dir},
		Failpoints: failpoints,
	})
	if err != nil {
		return nil, err
	}
	return &host{server: &server{Process: p, home: home, registry: registry}, name: name}, nil
}

// probe is the client of /healthz: a stopped process does not answer.
var probe = &http.Client{Timeout: 300 * time.Millisecond}

// health returns the host's /healthz, or nil when it does not answer.
func (h *host) health() map[string]any {
	resp, err := probe.Get(strings.TrimSuffix(h.st.HTTP.URL, "/mcp") + "/healthz")
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var body map[string]any
	if json.NewDecoder(resp.Body).Decode(&body) != nil {
		return nil
	}
	return body
}

// role is the host's role as /healthz says it, "" when it does not answer.
func (h *host) role() string {
	r, _ := h.health()["role"].(string)
	return r
}

// waitRole polls the host's /healthz until it says role.
func (h *host) waitRole(t *testing.T, role string) {
	t.Helper()
	h.poll(t, h.name+" "+role, func() bool { return h.role() == role })
}

// activeOf waits until exactly one of hosts is active and returns it.
func activeOf(t *testing.T, hosts ...*host) *host {
	t.Helper()
	deadline := time.Now().Add(hangAfter)
	for time.Now().Before(deadline) {
		var active []*host
		for _, h := range hosts {
			if h.role() == statefile.RoleActive {
				active = append(active, h)
			}
		}
		if len(active) == 1 {
			return active[0]
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no single active host after %v", hangAfter)
	return nil
}

// update sets preference key to value through cs and reports whether the
// change was acknowledged, with the answer's text.
func update(t *testing.T, cs *mcp.ClientSession, key, value string) (bool, string) {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "update_preference",
		Arguments: map[string]string{"key": key, "value": value}})
	if err != nil {
		return false, err.Error()
	}
	return !res.IsError, text(res)
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

// connectTraced is connectHTTP with a client that signals wrote each time
// it has written a request.
func connectTraced(t *testing.T, st *statefile.State, wrote chan<- struct{}) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, nil)
	rt := traced{next: mcptest.Bearer{Token: st.Token}, wrote: wrote}
	cs, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: st.HTTP.URL,
		HTTPClient: &http.Client{Transport: rt}}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { cs.Close() })
	return cs
}

type traced struct {
	next  http.RoundTripper
	wrote chan<- struct{}
}

func (tr traced) RoundTrip(r *http.Request) (*http.Response, error) {
	trace := &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) {
		select {
		case tr.wrote <- struct{}{}:
		default:
		}
	}}
	return tr.next.RoundTrip(r.WithContext(httptrace.WithClientTrace(r.Context(), trace)))
}

// sampler reads every host's role every 50 ms and records each moment two
// of them said they were active.
type sampler struct {
	stop chan struct{}
	done chan struct{}

	mu         sync.Mutex
	samples    int
	violations []string
}

func sample(hosts ...*host) *sampler {
	s := &sampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			roles := make([]string, len(hosts))
			var wg sync.WaitGroup
			for i, h := range hosts {
				wg.Go(func() { roles[i] = h.role() })
			}
			wg.Wait()
			var active []string
			for i, r := range roles {
				if r == statefile.RoleActive {
					active = append(active, hosts[i].name)
				}
			}
			s.mu.Lock()
			s.samples++
			if len(active) > 1 {
				s.violations = append(s.violations, fmt.Sprintf("%s: %v all active", time.Now().Format(time.StampMilli), active))
			}
			s.mu.Unlock()
			select {
			case <-s.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

// check stops the sampler and fails the test if two hosts were ever
// active at once.
func (s *sampler) check(t *testing.T) {
	t.Helper()
	close(s.stop)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	t.Logf("%d samples of every host's role", s.samples)
	assert.Empty(t, s.violations, "two active writers at once")
	assert.Positive(t, s.samples)
}

// TestEtcdFailover: two hosts under one etcd; one is active, the other a
// standby that refuses MCP with the active writer's URL; SIGKILL the
// active and the standby takes over; never two active at once.
func TestEtcdFailover(t *testing.T) {
	srv := etcdtest.Start(t, nil)
	a := startHost(t, "a", srv.URL)
	a.waitRole(t, statefile.RoleActive)
	b := startHost(t, "b", srv.URL)
	s := sample(a, b)

	b.waitRole(t, statefile.RoleStandby)
	b.poll(t, "b to know the active writer", func() bool { return b.health()["active"] == a.st.HTTP.URL })
	hz, err := probe.Get(strings.TrimSuffix(b.st.HTTP.URL, "/mcp") + "/healthz")
	require.NoError(t, err)
	hz.Body.Close()
	assert.Equal(t, http.StatusServiceUnavailable, hz.StatusCode, "a standby's /healthz is 503")
	assert.Equal(t, a.st.HTTP.URL, hz.Header.Get(lifecycle.ActiveHeader))
	resp, body := post(t, b.st, func(*http.Request) {})
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.Equal(t, a.st.HTTP.URL, resp.Header.Get(lifecycle.ActiveHeader))
	assert.Contains(t, body, a.st.HTTP.URL)
	out, err := exec.CommandContext(t.Context(), mcpkeepBin, "status", "--home", b.home).Output()
	require.NoError(t, err)
	assert.Contains(t, string(out), "role:      standby")
	assert.Contains(t, string(out), "the active writer is "+a.st.HTTP.URL)
	out, err = exec.CommandContext(t.Context(), mcpkeepBin, "status", "--home", a.home).Output()
	require.NoError(t, err)
	assert.Contains(t, string(out), "role:      active writer")

	acked, answer := update(t, connectHTTP(t, a.st), "tone", "from-a")
	require.True(t, acked, answer)

	killed := time.Now()
	require.NoError(t, a.Kill())
	a.Wait()
	b.waitRole(t, statefile.RoleActive)
	t.Logf("standby active %v after the active writer's SIGKILL (TTL %v)", time.Since(killed).Round(time.Millisecond), etcdTTL)
	acked, answer = update(t, connectHTTP(t, b.st), "tone", "from-b")
	assert.True(t, acked, answer)
	t.Logf("first change acknowledged by the new writer %v after the SIGKILL", time.Since(killed).Round(time.Millisecond))
	s.check(t)
}

// TestEtcdFencing: the active writer is stopped (SIGSTOP) past its lease,
// with a change made but not yet answered; the standby takes over and
// writes; the old writer, continued, acknowledges no change: not the one
// in flight, not one its client sent while it was stopped, not one sent
// after.
func TestEtcdFencing(t *testing.T) {
	srv := etcdtest.Start(t, nil)
	// The second change sleeps between its commit and its answer: long
	// enough (2.5 TTLs) that the test stops the writer before the sleep
	// ends, even on a loaded machine.
	a := startHostArmed(t, "a", srv.URL, "lifecycle.before-ack=sleep(5s)@2")
	a.waitRole(t, statefile.RoleActive)
	b := startHost(t, "b", srv.URL)
	b.waitRole(t, statefile.RoleStandby)
	ca := connectHTTP(t, a.st)
	acked, answer := update(t, ca, "tone", "a-before")
	require.True(t, acked, answer)
	// cw's requests say when they have been written.
	wrote := make(chan struct{}, 16)
	cw := connectTraced(t, a.st, wrote)
	s := sample(a, b)

	type result struct {
		what   string
		acked  bool
		answer string
	}
	results := make(chan result, 5)
	var wg sync.WaitGroup
	send := func(cs *mcp.ClientSession, value string) {
		wg.Go(func() {
			ok, text := update(t, cs, "tone", value)
			results <- result{value, ok, text}
		})
	}
	send(ca, "a-in-flight")
	a.poll(t, "the change in flight committed", func() bool { return changes(t, a.home) == 2 })
	require.NoError(t, syscall.Kill(a.Pid(), syscall.SIGSTOP))
	stopped := true
	defer func() {
		if stopped {
			syscall.Kill(a.Pid(), syscall.SIGCONT)
		}
	}()
	b.waitRole(t, statefile.RoleActive)
	acked, answer = update(t, connectHTTP(t, b.st), "tone", "b-after")
	require.True(t, acked, answer)

	for len(wrote) > 0 {
		<-wrote
	}
	send(cw, "a-while-stopped")
	select { // the request is in the stopped process's socket
	case <-wrote:
	case <-time.After(hangAfter):
		t.Fatal("the change to the stopped writer was not sent")
	}
	require.NoError(t, syscall.Kill(a.Pid(), syscall.SIGCONT))
	stopped = false
	for i := range 2 {
		send(ca, fmt.Sprintf("a-after-%d", i))
	}
	wg.Wait()
	close(results)
	for r := range results {
		t.Logf("the old writer answered %s: %s", r.what, r.answer)
		assert.False(t, r.acked, "the old writer acknowledged %s after losing its lease: %s", r.what, r.answer)
		if r.what == "a-in-flight" {
			assert.Contains(t, r.answer, "is not acknowledged: this server lost the writer's lease")
		} else {
			assert.Regexp(t, `not the active writer|Service Unavailable`, r.answer)
		}
	}
	a.waitRole(t, statefile.RoleStandby)
	a.poll(t, "a to know the new writer", func() bool { return a.health()["active"] == b.st.HTTP.URL })
	s.check(t)
	// a made two changes: the one acknowledged, and the one in flight
	// when it was stopped; none after.
	assert.Equal(t, 2, changes(t, a.home))
}

// changes counts the update_preference commits in home's history.
func changes(t *testing.T, home string) int {
	t.Helper()
	out, err := exec.CommandContext(t.Context(), "git", "-C", filepath.Join(home, "config"), "log", "--format=%s").Output()
	require.NoError(t, err)
	return strings.Count(string(out), "update_preference")
}

// TestEtcdDown: with etcd stopped, the active writer serves reads and
// refuses changes once its lease cannot be renewed, the standby stays a
// standby, and the writer resumes when etcd is back.
func TestEtcdDown(t *testing.T) {
	srv := etcdtest.Start(t, nil)
	a := startHost(t, "a", srv.URL)
	a.waitRole(t, statefile.RoleActive)
	b := startHost(t, "b", srv.URL)
	b.waitRole(t, statefile.RoleStandby)
	ca := connectHTTP(t, a.st)
	acked, answer := update(t, ca, "tone", "before")
	require.True(t, acked, answer)
	s := sample(a, b)

	srv.Stop()
	a.waitRole(t, statefile.RoleReadOnly)
	res, err := ca.CallTool(t.Context(), &mcp.CallToolParams{Name: "get_persona", Arguments: map[string]string{}})
	require.NoError(t, err)
	assert.False(t, res.IsError, text(res))
	assert.Contains(t, text(res), "before", "reads are served")
	acked, answer = update(t, ca, "tone", "while-down")
	assert.False(t, acked, "a change was acknowledged with etcd down")
	assert.Contains(t, answer, "refused: this server is not the active writer")
	assert.Contains(t, answer, "not renewed in time")
	assert.Equal(t, statefile.RoleStandby, b.role())

	srv.Restart()
	a.waitRole(t, statefile.RoleActive)
	acked, answer = update(t, ca, "tone", "after")
	assert.True(t, acked, answer)
	assert.Equal(t, statefile.RoleStandby, b.role())
	s.check(t)
}
