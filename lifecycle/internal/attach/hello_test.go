package attach_test

import (
	"context"
	"net"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/lifecycle/internal/attach"
)

// TestDialEndsWithItsContext: a writer that takes the connection and never
// says hello (stopped, frozen) does not hold Dial for the hello's timeout
// once the caller's context ends: Dial returns the context's error, not
// ErrNoWriter after HelloTimeout.
func TestDialEndsWithItsContext(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mcp.sock")
	ln, err := net.Listen("unix", path)
	require.NoError(t, err)
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			accepted <- c // held open, never read or written
		}
	}()

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := attach.Dial(ctx, path, attach.Hello{PID: 1, Name: "notes"})
		done <- err
	}()
	var c net.Conn
	select {
	case c = <-accepted:
		defer c.Close()
	case err := <-done:
		t.Fatalf("Dial returned before the writer took the connection: %v", err)
	}
	cancel()
	err = <-done
	assert.ErrorIs(t, err, context.Canceled)
	assert.NotErrorIs(t, err, attach.ErrNoWriter, "not the hello's timeout")
}
