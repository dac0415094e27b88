package main

import (
	"bytes"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/atomicfile"
	"github.com/mcpkeep/mcpkeep/internal/helios"
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

	type call struct {
		key, value string
		res        *mcp.CallToolResult
		err        error
	}
	calls := make([]call, 0, 2*n)
	for _, transport := range []string{"stdio", "http"} {
		for i := range n {
			calls = append(calls, call{key: fmt.Sprintf("%s%02d", transport, i), value: fmt.Sprintf("v%02d", i)})
		}
	}
	var wg sync.WaitGroup
	for i := range calls {
		c, cs := &calls[i], stdio
		if i >= n {
			cs = web
		}
		wg.Go(func() {
			c.res, c.err = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "update_preference",
				Arguments: map[string]any{"key": c.key, "value": c.value}})
		})
	}
	wg.Wait()
	acked := map[string]string{} // commit hash by key
	for _, c := range calls {
		require.NoError(t, c.err, c.key)
		require.False(t, c.res.IsError, "%s: %s", c.key, mcptest.Text(c.res))
		out, ok := c.res.StructuredContent.(map[string]any)
		require.True(t, ok, "%s: %v", c.key, c.res.StructuredContent)
		hash, _ := out["commit"].(string)
		require.NotEmpty(t, hash, "%s is acknowledged with a commit", c.key)
		acked[c.key] = hash
	}

	require.NoError(t, stdio.Close()) // closes helios's stdin
	require.NoError(t, s.exit(t, hangAfter), "a clean stop at stdin EOF")

	var p helios.Persona
	require.NoError(t, atomicfile.ReadYAMLStrict(filepath.Join(home, "config", "personas", "default.yaml"), &p))
	for _, c := range calls {
		assert.Equal(t, c.value, p.Preferences[c.key], "%s on disk", c.key)
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
	for key, hash := range acked {
		assert.Equal(t, "update_preference default."+key, subjects[hash], "the commit acknowledged for %s", key)
	}
	assert.Empty(t, git(t, config, "status", "--porcelain"), "a clean work tree")

	doctor := exec.Command(mcpkeepBin, "doctor", "--home", home)
	out, err := doctor.CombinedOutput()
	assert.NoError(t, err, "mcpkeep doctor:\n%s", out)
}
