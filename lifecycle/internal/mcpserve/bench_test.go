package mcpserve

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpkeep/mcpkeep/internal/mcptest"
)

// BenchmarkHTTPCall measures a trivial tool call over Streamable HTTP from
// 1, 8 and 64 sessions at once, through Serve (limits, routing, guards,
// the token) and through the go-sdk handler alone, both in this process
// on loopback. ns/op is per call; the two sub-benchmarks of one session
// count side by side give the transport's cost.
//
//	go test -run '^$' -bench HTTPCall -count 6 ./lifecycle/internal/mcpserve
func BenchmarkHTTPCall(b *testing.B) {
	server := mcp.NewServer(&mcp.Implementation{Name: "bench", Version: "v0"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "echo"}, func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, echoOut, error) {
		return nil, echoOut(in), nil
	})
	for _, kind := range []string{"mcpserve", "go-sdk"} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		url, token := "http://"+ln.Addr().String()+"/mcp", ""
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		if kind == "mcpserve" {
			token = "tok"
			wg.Go(func() { Serve(ctx, server, Options{Listener: ln, Token: token}) })
		} else {
			srv := &http.Server{Handler: mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)}
			wg.Go(func() { srv.Serve(ln) })
			wg.Go(func() { <-ctx.Done(); srv.Close() })
		}
		for _, n := range []int{1, 8, 64} {
			b.Run(fmt.Sprintf("%s/sessions=%d", kind, n), func(b *testing.B) {
				var rt http.RoundTripper = &http.Transport{MaxIdleConnsPerHost: n}
				if token != "" {
					rt = mcptest.Bearer{Token: token, Base: rt}
				}
				sessions := make(chan *mcp.ClientSession, n)
				for range n {
					client := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "v0"}, nil)
					cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: rt}},
						&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
					if err != nil {
						b.Fatal(err)
					}
					defer cs.Close()
					sessions <- cs
				}
				b.SetParallelism((n + 1) / 2) // GOMAXPROCS goroutines per unit
				b.RunParallel(func(pb *testing.PB) {
					cs := <-sessions
					defer func() { sessions <- cs }()
					for pb.Next() {
						if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]int{"n": 1}}); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		}
		cancel()
		wg.Wait()
	}
}
