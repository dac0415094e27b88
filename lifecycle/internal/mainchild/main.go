// Command mainchild is a test helper of package lifecycle: a server whose
// main is lifecycle.Main, so that tests can see Main's exit statuses,
// signals and stderr from outside the process. Its flags choose the
// Options; it parses nothing else.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpkeep/mcpkeep/lifecycle"
)

func main() {
	home := flag.String("home", "", "the home")
	registry := flag.String("registry", "", "the registry file; empty: none")
	exclusive := flag.Bool("exclusive", false, "Options.Exclusive")
	server := flag.String("server", "ok", "what NewServer does: ok, nil (a nil server and no error) or fail")
	name := flag.String("name", "mainchild", "Options.Name")
	shutdown := flag.Duration("shutdown", 0, "Options.ShutdownTimeout")
	block := flag.Bool("block", false, "serve the tools \"block\" and \"block_update\", which block for ever, ignoring their context (the second inside an Update's function)")
	flag.Parse()
	lifecycle.Main(lifecycle.Options{
		Name:            *name,
		Home:            *home,
		Registry:        *registry,
		NoRegistry:      *registry == "",
		Exclusive:       *exclusive,
		ShutdownTimeout: *shutdown,
		NewServer: func(env *lifecycle.Env) (*mcp.Server, error) {
			switch *server {
			case "nil":
				return nil, nil
			case "fail":
				return nil, errors.New("mainchild: NewServer fails, as -server fail asks")
			}
			s := mcp.NewServer(&mcp.Implementation{Name: "mainchild", Version: "v0"}, nil)
			mcp.AddTool(s, &mcp.Tool{Name: "print", Description: "prints to stdout, and runs a program that does"},
				func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, struct{}, error) {
					fmt.Println("mainchild: print: stray output from a tool")
					out := exec.CommandContext(ctx, "echo", "mainchild: print: output of a program a tool runs")
					out.Stdout = os.Stdout // as a tool that passes its stdout on would
					return nil, struct{}{}, out.Run()
				})
			if *block {
				mcp.AddTool(s, &mcp.Tool{Name: "block", Description: "blocks for ever, ignoring its context"},
					func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, struct{}, error) {
						fmt.Fprintln(os.Stderr, "mainchild: block: called")
						select {}
					})
				mcp.AddTool(s, &mcp.Tool{Name: "block_update", Description: "blocks for ever inside a transaction's function, holding the turn"},
					func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, struct{}, error) {
						_, err := env.Update(ctx, "block", func(*lifecycle.Tx) error {
							fmt.Fprintln(os.Stderr, "mainchild: block_update: called")
							select {}
						})
						return nil, struct{}{}, err
					})
			}
			return s, nil
		},
	})
	os.Exit(99) // Main does not return
}
