package lifecycle_test

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/mcpkeep/mcpkeep/lifecycle"
)

// TestPollableStdin: a pipe given as stdin is read through a file in
// non-blocking mode (on Go's poller), with the same bytes; a regular file
// and a reader that is not a file are used as they are.
func TestPollableStdin(t *testing.T) {
	// A pipe as a process inherits it: in blocking mode (os.Pipe's are on
	// the poller already, and pollable leaves them alone).
	var fds [2]int
	require.NoError(t, unix.Pipe(fds[:]))
	r, w := os.NewFile(uintptr(fds[0]), "stdin"), os.NewFile(uintptr(fds[1]), "client")
	t.Cleanup(func() { r.Close(); w.Close() })
	got := lifecycle.Pollable(r)
	f, ok := got.(*os.File)
	require.True(t, ok)
	assert.NotSame(t, r, f, "a file of its own, on the same descriptor")
	flags, err := unix.FcntlInt(uintptr(fds[0]), unix.F_GETFL, 0)
	require.NoError(t, err)
	assert.NotZero(t, flags&unix.O_NONBLOCK, "non-blocking")
	assert.Same(t, f, lifecycle.Pollable(r), "one file per file")
	go func() {
		w.WriteString("hello\n")
		w.Close()
	}()
	data, err := io.ReadAll(f)
	require.NoError(t, err)
	assert.Equal(t, "hello\n", string(data))

	pr, pw, err := os.Pipe()
	require.NoError(t, err)
	t.Cleanup(func() { pr.Close(); pw.Close() })
	assert.Same(t, pr, lifecycle.Pollable(pr), "os.Pipe's file is on the poller already")

	regular, err := os.Create(filepath.Join(t.TempDir(), "in"))
	require.NoError(t, err)
	defer regular.Close()
	assert.Same(t, regular, lifecycle.Pollable(regular))
	sr := strings.NewReader("x")
	assert.Equal(t, io.Reader(sr), lifecycle.Pollable(sr))
}
