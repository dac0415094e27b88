package attach_test

import (
	"context"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpkeep/mcpkeep/lifecycle/internal/attach"
)

// BenchmarkForwardedCall is one tool call through a Forwarder and the
// socket (forwarded), beside the same call on an in-memory session of the
// same server (direct): what attaching adds to a call, in one process.
//
//	go test -run '^$' -bench ForwardedCall -count 6 ./lifecycle/internal/attach
func BenchmarkForwardedCall(b *testing.B) {
	ts := newServer("writer", nil)
	b.Run("path=direct", func(b *testing.B) {
		ct, st := mcp.NewInMemoryTransports()
		ss, err := ts.Connect(b.Context(), st, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer ss.Close()
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "v0"}, nil).Connect(b.Context(), ct, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer cs.Close()
		for b.Loop() {
			if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "who"}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("path=forwarded", func(b *testing.B) {
		path := attach.Path(b.TempDir())
		ln, err := attach.Listen(path)
		if err != nil {
			b.Fatal(err)
		}
		l, err := attach.NewListener(attach.ListenerOptions{Server: ts.Server})
		if err != nil {
			b.Fatal(err)
		}
		go l.Serve(ln)
		defer func() {
			attach.Unlisten(ln, path)
			l.Shutdown(context.Background())
		}()
		ct, ft := mcp.NewInMemoryTransports()
		fc, _ := ft.Connect(b.Context())
		f := attach.NewForwarder(fc, attach.ForwarderOptions{})
		conn, err := attach.Dial(b.Context(), path, attach.Hello{})
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- f.Attach(ctx, conn, conn.Writer.PID) }()
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "v0"}, nil).Connect(b.Context(), ct, nil)
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "who"}); err != nil {
				b.Fatal(err)
			}
		}
		cs.Close()
		cancel()
		<-done
		f.Close()
	})
}
