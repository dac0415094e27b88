package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/crashtest"
	"github.com/mcpkeep/mcpkeep/internal/mcptest"
	"github.com/mcpkeep/mcpkeep/lifecycle"
	"github.com/mcpkeep/mcpkeep/statefile"
)

// Exit statuses of helios (heliosmain.Main): lifecycle.Main's, and 2 for
// a bad flag.
const (
	exitError = lifecycle.ExitError
	exitUsage = lifecycle.ExitOptions
	exitInUse = lifecycle.ExitInUse
)

// hangAfter is how long a test waits for a helios to get ready or to exit
// before it fails it as hung. It is a failure detector, not a speed goal.
const hangAfter = 60 * time.Second

// Binaries built once by TestMain.
var heliosBin, mcpkeepBin, bareBin, bareHTTPBin string

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "helios-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	for pkg, bin := range map[string]*string{
		"github.com/mcpkeep/mcpkeep/cmd/helios":                      &heliosBin,
		"github.com/mcpkeep/mcpkeep/cmd/mcpkeep":                     &mcpkeepBin,
		"github.com/mcpkeep/mcpkeep/cmd/helios/internal/bare-helios": &bareBin,
		"github.com/mcpkeep/mcpkeep/cmd/helios/internal/bare-http":   &bareHTTPBin,
	} {
		if *bin, err = crashtest.Build(ctx, pkg, dir); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	return m.Run()
}

// server is one helios process started by a test.
type server struct {
	*crashtest.Process
	home, registry string
}

// start starts helios on home with the registry file registry and extra
// args. Its stdin is a pipe the test holds open: closing it (or a signal)
// stops the server. The test's end kills it if it still runs.
func start(t *testing.T, home, registry string, args ...string) *server {
	t.Helper()
	s, err := startNoCleanup(t, home, registry, args...)
	require.NoError(t, err)
	t.Cleanup(s.stop)
	return s
}

// startNoCleanup is start for other goroutines than the test's: the
// caller checks the error and registers stop with t.Cleanup.
func startNoCleanup(t *testing.T, home, registry string, args ...string) (*server, error) {
	args = append([]string{"--home", home, "--registry", registry}, args...)
	p, err := crashtest.Start(t.Context(), crashtest.Cmd{Path: heliosBin, Args: args})
	if err != nil {
		return nil, err
	}
	return &server{Process: p, home: home, registry: registry}, nil
}

// stop kills the server if it still runs and reaps it.
func (s *server) stop() {
	s.Kill()
	s.Wait()
}

// startHTTP starts helios with --http 127.0.0.1:0 in a fresh home and waits
// until it is ready.
func startHTTP(t *testing.T, registry string) (*server, *statefile.State) {
	t.Helper()
	s := start(t, filepath.Join(t.TempDir(), "home"), registry, "--http", "127.0.0.1:0")
	return s, s.ready(t)
}

// ready polls the state file until it names this process as ready, and
// returns it.
func (s *server) ready(t *testing.T) *statefile.State {
	t.Helper()
	var st *statefile.State
	s.poll(t, "a ready state file", func() bool {
		var err error
		st, err = statefile.Read(filepath.Join(s.home, statefile.FileName))
		return err == nil && st.PID == s.Pid() && st.Status == statefile.StatusReady
	})
	return st
}

// poll calls cond until it holds; it fails the test when the process exits
// first or after hangAfter.
func (s *server) poll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(hangAfter)
	for !cond() {
		if s.Exited() {
			t.Fatalf("helios exited (%v) before %s; stderr:\n%s", s.Wait(), what, s.Stderr())
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s after %v; stderr:\n%s", what, hangAfter, s.Stderr())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// exit waits for the process to exit, failing the test after limit.
func (s *server) exit(t *testing.T, limit time.Duration) error {
	t.Helper()
	select {
	case <-s.Done():
		return s.Wait()
	case <-time.After(limit):
		t.Fatalf("helios did not exit within %v; stderr:\n%s", limit, s.Stderr())
		return nil
	}
}

// stateGone reports whether the home's state file is absent.
func stateGone(t *testing.T, home string) bool {
	_, err := os.Stat(filepath.Join(home, statefile.FileName))
	if err == nil {
		return false
	}
	require.ErrorIs(t, err, fs.ErrNotExist)
	return true
}

// connectHTTP connects a go-sdk client to st's URL with its token.
func connectHTTP(t *testing.T, st *statefile.State) *mcp.ClientSession {
	t.Helper()
	require.NotNil(t, st.HTTP, "state file has no HTTP endpoint")
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, nil)
	cs, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: st.HTTP.URL,
		HTTPClient: &http.Client{Transport: mcptest.Bearer{Token: st.Token}}}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { cs.Close() })
	return cs
}

// jsonRPC checks that line is one JSON-RPC 2.0 message: a request, a
// notification or a response.
func jsonRPC(t *testing.T, line []byte) {
	t.Helper()
	var msg struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Method  string          `json:"method"`
		Result  json.RawMessage `json:"result"`
		Error   json.RawMessage `json:"error"`
	}
	require.NoError(t, json.Unmarshal(line, &msg), "stdout line is not JSON: %q", line)
	require.Equal(t, "2.0", msg.JSONRPC, "stdout line is not JSON-RPC 2.0: %q", line)
	isResponse := msg.ID != nil && (msg.Result != nil || msg.Error != nil)
	require.True(t, msg.Method != "" || isResponse, "stdout line is neither a request nor a response: %q", line)
}
