package main

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/atomicfile"
	"github.com/mcpkeep/mcpkeep/cmd/internal/helios"
	"github.com/mcpkeep/mcpkeep/internal/mcptest"
)

// git runs git in dir and returns its stdout, failing t on an error.
func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "safe.directory=*", "-C", dir}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "git %s: %s", strings.Join(args, " "), &stderr)
	return string(out)
}

// TestStdioAndHTTPUpdateAtOnce: a stdio client and an HTTP client of one
// helios change preferences at the same time, every call of each in
// flight at once. Every change is acknowledged, on disk and committed on
// its own, the work tree is clean, and `mcpkeep doctor` finds nothing.
func TestStdioAndHTTPUpdateAtOnce(t *testing.T) {
	const n = 20
	home := filepath.Join(t.TempDir(), "home")
	s := start(t, home, filepath.Join(t.TempDir(), "servers.json"), "--http", "127.0.0.1:0")
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, nil)
	stdio, err := client.Connect(t.Context(), &mcp.IOTransport{Reader: s.Stdout(), Writer: s.Stdin()}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { stdio.Close() })
	web := connectHTTP(t, s.ready(t))

	calls := mcptest.UpdateAtOnce(t, n, "update_preference",
		func(key, value string) any { return map[string]any{"key": key, "value": value} },
		map[string]*mcp.ClientSession{"stdio": stdio, "http": web})

	require.NoError(t, stdio.Close()) // closes helios's stdin
	require.NoError(t, s.exit(t, hangAfter), "a clean stop at stdin EOF")

	var p helios.Persona
	require.NoError(t, atomicfile.ReadYAMLStrict(filepath.Join(home, "config", "personas", "default.yaml"), &p))
	for _, c := range calls {
		assert.Equal(t, c.Value, p.Preferences[c.Key], "%s on disk", c.Key)
	}
	config := filepath.Join(home, "config")
	subjects := map[string]string{} // subject by commit hash
	updates := 0
	for line := range strings.Lines(git(t, config, "log", "--format=%H %s")) {
		hash, subject, _ := strings.Cut(strings.TrimSuffix(line, "\n"), " ")
		subjects[hash] = subject
		if strings.HasPrefix(subject, "update_preference ") {
			updates++
		}
	}
	assert.Equal(t, 2*n, updates, "one commit per change")
	for _, c := range calls {
		assert.Equal(t, "update_preference default."+c.Key, subjects[c.Commit], "the commit acknowledged for %s", c.Key)
	}
	assert.Empty(t, git(t, config, "status", "--porcelain"), "a clean work tree")

	doctor := exec.Command(mcpkeepBin, "doctor", "--home", home)
	out, err := doctor.CombinedOutput()
	assert.NoError(t, err, "mcpkeep doctor:\n%s", out)
}
