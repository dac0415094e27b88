package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/crashtest"
	"github.com/mcpkeep/mcpkeep/internal/mcptest"
)

// TestAttachToAStartingWriter: a client that sends its requests and closes
// its stdin at once, launched while the home's writer is still installing
// (its socket not yet bound), gets every answer once the writer serves;
// before, its launch saw the client gone and left without a word.
func TestAttachToAStartingWriter(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	writer, err := crashtest.Start(t.Context(), crashtest.Cmd{Path: heliosBin,
		Args:       []string{"--home", home, "--registry", ""},
		Failpoints: "bootstrap.after-dirs=sleep(1s)"})
	require.NoError(t, err)
	t.Cleanup(func() { writer.Kill(); writer.Wait() })
	deadline := time.Now().Add(hangAfter)
	for {
		if _, err := os.Stat(filepath.Join(home, "config")); err == nil {
			break // the writer holds the lock and sleeps in its install
		}
		require.True(t, time.Now().Before(deadline), "the writer never began its install")
		time.Sleep(5 * time.Millisecond)
	}

	cmd := exec.CommandContext(t.Context(), heliosBin, "--home", home, "--registry", "")
	cmd.Stdin = strings.NewReader(mcptest.Handshake + `{"jsonrpc":"2.0","id":2,"method":"tools/list"}` + "\n")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, stderr.String())
	assert.Contains(t, string(out), `"id":0`, "initialize answered: %s", stderr.String())
	assert.Contains(t, string(out), `"id":2`, "tools/list answered")
	assert.Contains(t, stderr.String(), "attached to the home's writer")
}
