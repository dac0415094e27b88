package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/crashtest"
	"github.com/mcpkeep/mcpkeep/gitstore"
	"github.com/mcpkeep/mcpkeep/internal/mcptest"
	"github.com/mcpkeep/mcpkeep/statefile"
)

// hangAfter is how long a test waits for a helios to get ready before it
// fails it as hung; a failure detector, not a speed goal.
const hangAfter = 60 * time.Second

// Binaries built once by TestMain.
var heliosBin, mcpkeepBin string

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "mcpkeep-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	for pkg, bin := range map[string]*string{
		"github.com/mcpkeep/mcpkeep/cmd/helios":  &heliosBin,
		"github.com/mcpkeep/mcpkeep/cmd/mcpkeep": &mcpkeepBin,
	} {
		if *bin, err = crashtest.Build(context.Background(), pkg, dir); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	return m.Run()
}

// result is what one mcpkeep run printed and its exit status.
type result struct {
	stdout, stderr string
	code           int
}

// mcpkeep runs the CLI with args and no MCPKEEP_* or HELIOS_HOME from the
// test's environment.
func mcpkeep(t *testing.T, args ...string) result {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), mcpkeepBin, args...)
	cmd.Env = append(os.Environ(), "MCPKEEP_HOME=", "HELIOS_HOME=", "MCPKEEP_REGISTRY="+filepath.Join(t.TempDir(), "servers.json"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		require.NoError(t, err)
	}
	return result{stdout.String(), stderr.String(), cmd.ProcessState.ExitCode()}
}

// installed returns a helios home that has run once and made two
// preference changes, so it has three commits.
func installed(t *testing.T) string {
	t.Helper()
	home := filepath.Join(t.TempDir(), "home")
	input := mcptest.Handshake
	for i, key := range []string{"tone", "style"} { // two keys: the calls may run in either order
		input += mcptest.ToolCall(t, i+1, "update_preference", map[string]string{"key": key, "value": "new"})
	}
	cmd := exec.CommandContext(t.Context(), heliosBin, "--home", home, "--registry", "")
	cmd.Stdin = strings.NewReader(input)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, stderr.String())
	require.Equal(t, 3, strings.Count(string(out), "\n"), "three answers: %s", out)
	require.Len(t, history(t, home), 3)
	return home
}

// history returns the commits of home's config, newest first.
func history(t *testing.T, home string) []gitstore.Commit {
	t.Helper()
	store, err := gitstore.Open(filepath.Join(home, "config"), &gitstore.Options{ReadOnly: true})
	require.NoError(t, err)
	defer store.Close()
	commits, err := store.History("", 0)
	require.NoError(t, err)
	return commits
}

// live starts helios with HTTP on home, registered in registry, and waits
// until it is ready. The test's end stops it.
func live(t *testing.T, home, registry string) (*crashtest.Process, *statefile.State) {
	t.Helper()
	p, err := crashtest.Start(t.Context(), crashtest.Cmd{Path: heliosBin,
		Args: []string{"--home", home, "--registry", registry, "--http", "127.0.0.1:0"}})
	require.NoError(t, err)
	t.Cleanup(func() {
		p.Kill()
		p.Wait()
	})
	deadline := time.Now().Add(hangAfter)
	for {
		st, err := statefile.Read(filepath.Join(home, statefile.FileName))
		if err == nil && st.PID == p.Pid() && st.Status == statefile.StatusReady {
			require.NotEmpty(t, st.Token)
			return p, st
		}
		if p.Exited() || time.Now().After(deadline) {
			t.Fatalf("helios not ready (exited: %t); stderr:\n%s", p.Exited(), p.Stderr())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// decode parses a --json output.
func decode[T any](t *testing.T, r result) T {
	t.Helper()
	var v T
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &v), "stdout is not JSON: %s", r.stdout)
	return v
}
