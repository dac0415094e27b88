package mcpserve

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
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

// BenchmarkHandlerCall measures one tool call of a live session through
// the HTTP handler alone, in memory, with no connection: through the
// transport's handler (impl=mcpserve: Host, Origin and token checks,
// the session table, the body read ahead) and through the go-sdk's
// handler alone (impl=go-sdk). The difference is what the transport adds
// to each call; -benchmem shows its allocations.
//
//	go test -run '^$' -bench HandlerCall -benchmem -count 6 ./lifecycle/internal/mcpserve
func BenchmarkHandlerCall(b *testing.B) {
	server := mcp.NewServer(&mcp.Implementation{Name: "bench", Version: "v0"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "echo"}, func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, echoOut, error) {
		return nil, echoOut(in), nil
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	for _, impl := range []string{"mcpserve", "go-sdk"} {
		b.Run("impl="+impl, func(b *testing.B) {
			var handler http.Handler
			if impl == "mcpserve" {
				h := newHTTPServer(server, nil, Options{Listener: ln, Token: "tok"}, slog.New(slog.DiscardHandler))
				defer h.sessions.close()
				handler = h.srv.Handler
			} else {
				handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
			}
			post := func(session, body string) *httptest.ResponseRecorder {
				r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(body))
				r.Host = ln.Addr().String()
				r.Header.Set("Content-Type", "application/json")
				r.Header.Set("Accept", "application/json, text/event-stream")
				r.Header.Set("Authorization", "Bearer tok")
				if session != "" {
					r.Header.Set(sessionHeader, session)
					r.Header.Set(versionHeader, "2025-11-25")
				}
				w := httptest.NewRecorder()
				handler.ServeHTTP(w, r)
				if w.Code >= 300 {
					b.Fatalf("%s: %d %s", body, w.Code, w.Body)
				}
				return w
			}
			w := post("", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"b","version":"v0"}}}`)
			id := w.Header().Get(sessionHeader)
			post(id, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
			call := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"n":1}}}`
			for b.Loop() {
				if w := post(id, call); !strings.Contains(w.Body.String(), `"n":1`) {
					b.Fatalf("call answered %s", w.Body)
				}
			}
		})
	}
}
