// Command conformance-server serves the fixtures of the official MCP
// conformance suite (@modelcontextprotocol/conformance) on a
// lifecycle.Harness, so that the suite checks the harness itself: its home
// lock, bootstrap, recovery, state file, and the Streamable HTTP transport
// of lifecycle/internal/mcpserve with its Host and Origin checks.
//
// It is a test fixture, not a user-facing command: scripts/interop.sh
// builds and runs it. It serves HTTP only, on 127.0.0.1, at /mcp, without a
// bearer token (the suite sends none; the harness allows that on loopback
// only). Every other part of the harness stays on.
//
//	conformance-server [-port 0] [-home DIR]
//
// With -home empty it uses a fresh temporary home and removes it on exit.
// The URL it serves is in <home>/state.json and on stderr.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpkeep/mcpkeep/bootstrap"
	"github.com/mcpkeep/mcpkeep/lifecycle"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "conformance-server:", err)
		os.Exit(1)
	}
}

func run() error {
	port := flag.Int("port", 0, "TCP port on 127.0.0.1 (0 = any free port)")
	home := flag.String("home", "", "home directory (default: a fresh temporary directory, removed on exit)")
	flag.Parse()

	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if *home == "" {
		dir, err := os.MkdirTemp("", "conformance-home-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		*home = dir
	}

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()

	h, err := lifecycle.New(lifecycle.Options{
		Name:    "mcp-conformance-test-server",
		Version: "1.0.0",
		Home:    *home,
		Spec:    bootstrap.Spec{Schema: 1},
		NewServer: func(env *lifecycle.Env) (*mcp.Server, error) {
			server := newServer()
			wg.Go(func() { watchedResourceUpdater(ctx, server) })
			if st := env.State(); st.HTTP != nil {
				env.Logger.Info("conformance fixtures ready", "url", st.HTTP.URL)
			}
			return server, nil
		},
		NoStdio:    true,
		HTTP:       net.JoinHostPort("127.0.0.1", strconv.Itoa(*port)),
		NoToken:    true,
		NoRegistry: true,
		Logger:     log,
	})
	if err != nil {
		return err
	}
	if err := h.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// newServer builds the server exactly as the go-sdk everything-server does.
func newServer() *mcp.Server {
	server := mcp.NewServer(&mcp.Implementation{
		Name:    "mcp-conformance-test-server",
		Version: "1.0.0",
	}, &mcp.ServerOptions{
		CompletionHandler:  completionHandler,
		SubscribeHandler:   subscribeHandler,
		UnsubscribeHandler: unsubscribeHandler,
	})
	registerTools(server)
	registerResources(server)
	registerPrompts(server)
	return server
}
