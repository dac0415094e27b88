package main

import (
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestStderrReaderGone: a client that stops reading helios's stderr and
// then closes its stdin still gets a clean stop: the log lines of the
// shutdown fail instead of killing helios with SIGPIPE, and the state file
// is removed.
func TestStderrReaderGone(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	cmd := exec.Command(heliosBin, "--home", home, "--registry", "")
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { cmd.Process.Kill() })
	first := make([]byte, 1)
	_, err = stderr.Read(first) // helios has started logging
	require.NoError(t, err)
	require.NoError(t, stderr.Close())
	require.NoError(t, stdin.Close())
	err = cmd.Wait()
	assert.NoError(t, err, "helios exits with status 0, not killed by SIGPIPE")
	assert.True(t, stateGone(t, home), "the state file is removed")
}
