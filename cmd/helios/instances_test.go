package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/lifecycle"
	"github.com/mcpkeep/mcpkeep/portmgr"
	"github.com/mcpkeep/mcpkeep/statefile"
)

// TestExclusiveSecondInstanceThenSIGKILL: a second helios --exclusive on a
// home in use exits 3 naming the first; once the first is SIGKILLed, a new
// one reclaims the lock and replaces the stale state file.
func TestExclusiveSecondInstanceThenSIGKILL(t *testing.T) {
	registry := filepath.Join(t.TempDir(), "servers.json")
	first, st := startHTTP(t, registry)

	second := start(t, first.home, registry, "--http", "127.0.0.1:0", "--exclusive")
	err := second.exit(t, hangAfter)
	require.Error(t, err)
	assert.Equal(t, exitInUse, second.ExitCode(), second.Stderr())
	assert.Contains(t, second.Stderr(), "pid "+strconv.Itoa(first.Pid()))
	assert.Contains(t, second.Stderr(), st.HTTP.URL)
	assert.Equal(t, 1, strings.Count(second.Stderr(), "stop it or use another home"), second.Stderr())
	assert.NotContains(t, second.Stderr(), st.Token)
	after, err := statefile.Read(filepath.Join(first.home, statefile.FileName))
	require.NoError(t, err)
	assert.Equal(t, first.Pid(), after.PID, "the second left the first's state file alone")

	require.NoError(t, first.Kill())
	stale, err := statefile.Read(filepath.Join(first.home, statefile.FileName))
	require.NoError(t, err, "SIGKILL leaves the state file behind")
	assert.False(t, stale.Alive())

	third := start(t, first.home, registry, "--http", "127.0.0.1:0")
	now := third.ready(t)
	assert.Equal(t, third.Pid(), now.PID)
	assert.True(t, now.Alive())
	assert.Equal(t, st.Token, now.Token, "the home's token: a client configured with it keeps working")
	lockPID, err := os.ReadFile(filepath.Join(first.home, lifecycle.LockFile))
	require.NoError(t, err)
	assert.Equal(t, strconv.Itoa(third.Pid()), strings.TrimSpace(string(lockPID)), "the lock names the new server")
	assert.Contains(t, third.Stderr(), "reclaimed a stale lock")
	useTools(t, connectHTTP(t, now))
}

// TestTenInstances starts ten HTTP servers on ten homes at once: as soon
// as each appears in the registry its URL answers (a seed project
// registered after a sleep that guessed its port was bound), each gets its
// own port, all answer, `mcpkeep servers` lists all, and after SIGTERM the
// registry is empty.
func TestTenInstances(t *testing.T) {
	const n = 10
	registry := filepath.Join(t.TempDir(), "servers.json")
	servers := make([]*server, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range servers {
		home := filepath.Join(t.TempDir(), fmt.Sprintf("home%d", i))
		wg.Go(func() { servers[i], errs[i] = startNoCleanup(t, home, registry, "--http", "127.0.0.1:0") })
	}
	t.Cleanup(func() {
		wg.Wait()
		for _, s := range servers {
			if s != nil {
				s.stop()
			}
		}
	})
	started := make(chan struct{})
	go func() { wg.Wait(); close(started) }()

	// Each entry's /healthz is asked once, the moment the entry is first
	// seen, with no retry: a refused connection fails the test.
	reg := statefile.NewRegistry(registry)
	answered := map[int]bool{} // by pid
	deadline := time.Now().Add(hangAfter)
	for len(answered) < n {
		entries, err := reg.List()
		require.NoError(t, err)
		for _, e := range entries {
			if answered[e.State.PID] {
				continue
			}
			require.NotNil(t, e.State.HTTP, "pid %d registered without its URL", e.State.PID)
			resp, err := http.Get(strings.TrimSuffix(e.State.HTTP.URL, "/mcp") + "/healthz")
			require.NoError(t, err, "pid %d is registered at %s but does not answer there", e.State.PID, e.State.HTTP.URL)
			resp.Body.Close()
			require.Equal(t, http.StatusOK, resp.StatusCode, e.State.HTTP.URL)
			answered[e.State.PID] = true
		}
		select {
		case <-started:
			for _, err := range errs {
				require.NoError(t, err)
			}
			for _, s := range servers {
				if s.Exited() {
					t.Fatalf("helios pid %d exited (%v); stderr:\n%s", s.Pid(), s.Wait(), s.Stderr())
				}
			}
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d servers in the registry after %v", len(answered), n, hangAfter)
		}
		time.Sleep(5 * time.Millisecond)
	}
	<-started
	for _, err := range errs {
		require.NoError(t, err)
	}

	ports := map[int]bool{}
	for _, s := range servers {
		st := s.ready(t)
		require.NotNil(t, st.HTTP)
		ports[st.HTTP.Port] = true
		resp, err := http.Get(strings.TrimSuffix(st.HTTP.URL, "/mcp") + "/healthz")
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode, st.HTTP.URL)
	}
	assert.Len(t, ports, n, "distinct ports")

	listed := func() map[int]string {
		cmd := exec.Command(mcpkeepBin, "servers", "--registry", registry, "--json")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		require.NoError(t, err, stderr.String())
		var list struct {
			Servers []struct {
				PID  int    `json:"pid"`
				Home string `json:"home"`
				URL  string `json:"url"`
			} `json:"servers"`
		}
		require.NoError(t, json.Unmarshal(out, &list))
		pids := map[int]string{}
		for _, s := range list.Servers {
			pids[s.PID] = s.URL
		}
		return pids
	}
	pids := listed()
	assert.Len(t, pids, n, "all ten in `mcpkeep servers`")
	for _, s := range servers {
		assert.Contains(t, pids, s.Pid())
		assert.NotEmpty(t, pids[s.Pid()], "pid %d has a URL", s.Pid())
	}

	for _, s := range servers {
		require.NoError(t, syscall.Kill(s.Pid(), syscall.SIGTERM))
	}
	for _, s := range servers {
		assert.NoError(t, s.exit(t, hangAfter), s.Stderr())
		assert.True(t, stateGone(t, s.home), s.home)
	}
	var raw struct {
		Servers []json.RawMessage `json:"servers"`
	}
	data, err := os.ReadFile(registry)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &raw))
	assert.Empty(t, raw.Servers, "every server unregistered itself")
}

// TestRestartKeepsThePort: a server restarted after a crash gets the port
// of its last state file back, so clients that kept the URL find it again,
// even when the home's stable port has become free meanwhile.
func TestRestartKeepsThePort(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	registry := filepath.Join(t.TempDir(), "servers.json")
	stable := portmgr.StablePort(home, 0, 0)
	taken, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(stable)))
	if err != nil {
		t.Skipf("the home's stable port %d is in use by another process: %v", stable, err)
	}
	defer taken.Close()

	first := start(t, home, registry, "--http", "127.0.0.1:0")
	st := first.ready(t)
	require.NotNil(t, st.HTTP)
	port := st.HTTP.Port
	require.NotEqual(t, stable, port, "the stable port is taken")
	require.NoError(t, first.Kill())
	first.Wait()
	stale, err := statefile.Read(filepath.Join(home, statefile.FileName))
	require.NoError(t, err, "SIGKILL leaves the state file behind")
	require.Equal(t, port, stale.HTTP.Port)

	require.NoError(t, taken.Close()) // the stable port is free again
	second := start(t, home, registry, "--http", "127.0.0.1:0")
	now := second.ready(t)
	require.NotNil(t, now.HTTP)
	assert.Equal(t, port, now.HTTP.Port, "the last state file's port, not the stable %d", stable)
	useTools(t, connectHTTP(t, now))
}
