package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/mcpkeep/mcpkeep/crashtest"
)

// openPTY opens a pseudo-terminal and returns its two ends, or skips the
// test when the machine has none.
func openPTY(t *testing.T) (ptmx, tty *os.File) {
	t.Helper()
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal to run helios on: %v", err)
	}
	t.Cleanup(func() { ptmx.Close() })
	fd := int(ptmx.Fd())
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err == nil {
		err = unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0) // unlock the terminal end
	}
	if err != nil {
		t.Skipf("no pseudo-terminal to run helios on: %v", err)
	}
	tty, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal to run helios on: %v", err)
	}
	t.Cleanup(func() { tty.Close() })
	return ptmx, tty
}

// TestTerminalNotice: with stdin on a terminal, helios says on stderr, in
// one line, how it is meant to be used, and Ctrl-D (the end of the
// terminal's input) stops it cleanly. stdout stays the transport's.
func TestTerminalNotice(t *testing.T) {
	ptmx, tty := openPTY(t)
	home := filepath.Join(t.TempDir(), "home")
	var stdout strings.Builder
	p, err := crashtest.Start(t.Context(), crashtest.Cmd{Path: heliosBin, Stdin: tty, Stdout: &stdout,
		Args: []string{"--home", home, "--registry", ""}})
	require.NoError(t, err)
	s := &server{Process: p, home: home}
	t.Cleanup(s.stop)
	const notice = "helios: this is an MCP server speaking JSON-RPC on stdin/stdout; launch it from an MCP client, or press Ctrl-D to stop\n"
	s.poll(t, "notice on stderr", func() bool { return strings.Contains(s.Stderr(), notice) })
	s.ready(t)

	_, err = ptmx.Write([]byte{4}) // Ctrl-D
	require.NoError(t, err)
	require.NoError(t, s.exit(t, hangAfter), "Ctrl-D: a clean stop")
	assert.Equal(t, 1, strings.Count(s.Stderr(), notice), "said once")
	assert.True(t, strings.HasPrefix(s.Stderr(), notice), "before any log line:\n%s", s.Stderr())
	assert.Contains(t, s.Stderr(), "stdin closed")
	assert.Empty(t, stdout.String(), "nothing on stdout but the transport's messages")
}
