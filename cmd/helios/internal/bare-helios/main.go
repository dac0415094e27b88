// Command bare-helios serves helios's tools on an installed helios home
// over stdio with the go-sdk alone: no lock, no bootstrap, no recovery, no
// state file, no registry, no drain of calls in flight at EOF, no HTTP.
// Its changes still go through lifecycle.Env.Update, so it keeps the same
// files as helios. It exists as the reference that cmd/helios's
// BenchmarkColdStart measures the harness against; it is not a server to
// use, since two of it on one home would both write.
//
// Usage:
//
//	bare-helios --home DIR
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpkeep/mcpkeep/cmd/internal/helios"
	"github.com/mcpkeep/mcpkeep/gitstore"
	"github.com/mcpkeep/mcpkeep/lifecycle"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bare-helios", flag.ContinueOnError)
	fs.SetOutput(stderr)
	home := fs.String("home", "", "an installed helios home (run helios on it once first)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *home == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "usage: bare-helios --home DIR")
		return 2
	}
	if err := serve(ctx, *home, stdin, stdout, slog.New(slog.NewTextHandler(stderr, nil))); err != nil {
		fmt.Fprintln(stderr, "bare-helios:", err)
		return 1
	}
	return 0
}

func serve(ctx context.Context, home string, stdin io.Reader, stdout io.Writer, log *slog.Logger) error {
	abs, err := filepath.Abs(home)
	if err != nil {
		return err
	}
	configDir := filepath.Join(abs, "config")
	store, err := gitstore.Open(configDir, &gitstore.Options{Logger: log})
	if err != nil {
		return err
	}
	defer store.Close()
	env := &lifecycle.Env{Home: abs, ConfigDir: configDir, Store: store, Logger: log}
	server, err := helios.NewServer(env)
	if err != nil {
		return err
	}
	err = server.Run(ctx, &mcp.IOTransport{Reader: io.NopCloser(stdin), Writer: nopCloser{stdout}})
	if errors.Is(err, io.EOF) {
		return nil // the client closed stdin
	}
	return err
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }
