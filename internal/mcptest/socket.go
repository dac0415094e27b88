package mcptest

import (
	"net"
	"testing"

	"github.com/stretchr/testify/require"
)

// DeadSocket binds a unix socket at path and, unless listening, closes it
// leaving the file, as a writer that was killed leaves its socket; a
// listening one stays open until the test's end.
func DeadSocket(t testing.TB, path string, listening bool) {
	t.Helper()
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	require.NoError(t, err)
	ln.SetUnlinkOnClose(false)
	if listening {
		t.Cleanup(func() { ln.Close() })
		return
	}
	require.NoError(t, ln.Close())
}
