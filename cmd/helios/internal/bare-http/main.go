// Command bare-http serves MCP over Streamable HTTP with the go-sdk alone:
// its handler with default options (sessions), on 127.0.0.1, no token, no
// harness. It serves one trivial tool, get_persona, which answers a fixed
// persona; with --helios-home, helios's own tools on that installed home
// instead (reads only: it takes no lock). It exists as the reference that
// cmd/helios's BenchmarkHTTPGetPersona measures helios's HTTP transport
// against; it is not a server to use.
//
// Usage:
//
//	bare-http [--helios-home DIR]
//
// It prints its URL on stdout and serves until stdin ends.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpkeep/mcpkeep/cmd/internal/helios"
	"github.com/mcpkeep/mcpkeep/gitstore"
	"github.com/mcpkeep/mcpkeep/lifecycle"
)

// persona is what get_persona answers, shaped like helios's.
type persona struct {
	Name        string            `json:"name"`
	Preferences map[string]string `json:"preferences"`
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bare-http:", err)
		os.Exit(1)
	}
}

func run() error {
	home := flag.String("helios-home", "", "serve helios's tools on this installed home instead of the trivial one")
	flag.Parse()
	server := mcp.NewServer(&mcp.Implementation{Name: "bare-http", Version: "v0"}, nil)
	answer := persona{Name: "default", Preferences: map[string]string{"tone": "neutral", "verbosity": "normal"}}
	mcp.AddTool(server, &mcp.Tool{Name: "get_persona", Description: "Read one persona."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, persona, error) {
			return nil, answer, nil
		})
	if *home != "" {
		abs, err := filepath.Abs(*home)
		if err != nil {
			return err
		}
		log := slog.New(slog.DiscardHandler)
		store, err := gitstore.Open(filepath.Join(abs, "config"), &gitstore.Options{ReadOnly: true})
		if err != nil {
			return err
		}
		defer store.Close()
		env := &lifecycle.Env{Home: abs, ConfigDir: filepath.Join(abs, "config"), Store: store, Logger: log}
		if server, err = helios.NewServer(env); err != nil {
			return err
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)}
	go func() {
		io.Copy(io.Discard, os.Stdin)
		srv.Close()
	}()
	fmt.Printf("http://%s/mcp\n", ln.Addr())
	if err := srv.Serve(ln); err != http.ErrServerClosed {
		return err
	}
	return nil
}
