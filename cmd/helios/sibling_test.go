package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/cmd/internal/heliosmain"
	"github.com/mcpkeep/mcpkeep/crashtest"
	"github.com/mcpkeep/mcpkeep/internal/testserver/etcdtest"
	"github.com/mcpkeep/mcpkeep/lifecycle/etcdlock"
	"github.com/mcpkeep/mcpkeep/statefile"
)

// helios links no etcd client: asked for etcd by a flag, the environment
// or the home's etcd.yaml, it becomes the mcpkeep beside it by exec (the
// same PID, stdin and stdout), which serves it with the election.
func TestEtcdRunsTheSibling(t *testing.T) {
	etcd := etcdtest.Start(t, nil)
	for name, how := range map[string]struct {
		args []string
		env  []string
		file string
	}{
		"flag":      {args: []string{"--etcd", etcd.URL}},
		"env":       {env: []string{etcdlock.EnvEndpoints + "=" + etcd.URL}},
		"etcd.yaml": {file: "endpoints: [" + etcd.URL + "]\n"},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			home, registry := filepath.Join(dir, "home"), filepath.Join(dir, "servers.json")
			if how.file != "" {
				require.NoError(t, os.MkdirAll(home, 0o700))
				require.NoError(t, os.WriteFile(filepath.Join(home, etcdlock.ConfigFile), []byte(how.file), 0o600))
			}
			p, err := crashtest.Start(t.Context(), crashtest.Cmd{Path: heliosBin,
				Args: append([]string{"--home", home, "--registry", registry, "--etcd-name", "sibling-" + name}, how.args...),
				Env:  how.env})
			require.NoError(t, err)
			s := &server{Process: p, home: home, registry: registry}
			t.Cleanup(s.stop)
			s.ready(t) // the state file names the PID helios started with
			s.poll(t, "the writer elected through etcd", func() bool {
				st, err := statefile.Read(filepath.Join(home, statefile.FileName))
				return err == nil && st.Cluster != nil && st.Cluster.Role == statefile.RoleActive
			})
			if runtime.GOOS == "linux" {
				exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", s.Pid()))
				require.NoError(t, err)
				assert.Equal(t, mcpkeepBin, exe, "helios became its mcpkeep")
			}
			client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, nil)
			cs, err := client.Connect(t.Context(), &mcp.IOTransport{Reader: s.Stdout(), Writer: s.Stdin()}, nil)
			require.NoError(t, err, "the client on stdin and stdout did not notice")
			defer cs.Close()
			res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "get_persona", Arguments: map[string]any{}})
			require.NoError(t, err)
			assert.False(t, res.IsError, "%v", res.Content)
		})
	}
}

// A helios without its mcpkeep says where it looked and what to install;
// it does not serve without the election it was asked for.
func TestEtcdWithoutSibling(t *testing.T) {
	dir := t.TempDir()
	alone := filepath.Join(dir, "helios")
	data, err := os.ReadFile(heliosBin)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(alone, data, 0o755))
	home := filepath.Join(dir, "home")
	cmd := exec.Command(alone, "--home", home, "--registry", "", "--etcd", "127.0.0.1:1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	require.Error(t, cmd.Run())
	assert.Equal(t, exitError, cmd.ProcessState.ExitCode(), stderr.String())
	assert.Contains(t, stderr.String(), filepath.Join(dir, "mcpkeep"), "names the path it looked at")
	assert.Contains(t, stderr.String(), "cmd/mcpkeep", "says how to install it")
	assert.NoDirExists(t, home, "nothing was served")
}

// An mcpkeep that a helios of another build runs refuses, naming both.
func TestEtcdSiblingOfAnotherVersion(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	cmd := exec.Command(mcpkeepBin, "helios", "--home", home, "--registry", "", "--etcd", "127.0.0.1:1")
	cmd.Env = append(os.Environ(), heliosmain.EnvVersion+"=v0.0.1-other")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	require.Error(t, cmd.Run())
	assert.Equal(t, exitError, cmd.ProcessState.ExitCode(), stderr.String())
	assert.Contains(t, stderr.String(), "v0.0.1-other")
	assert.Contains(t, stderr.String(), mcpkeepBin)
	assert.True(t, strings.Contains(stderr.String(), "mcpkeep@v0.0.1-other"), "says which mcpkeep to install: %s", stderr.String())
	assert.NoDirExists(t, home, "nothing was served")
}
