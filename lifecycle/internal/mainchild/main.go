// Command mainchild is a test helper of package lifecycle: a server whose
// main is lifecycle.Main, so that tests can see Main's exit statuses,
// signals and stderr from outside the process. Its flags choose the
// Options; it parses nothing else.
package main

import (
	"errors"
	"flag"
	"os"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpkeep/mcpkeep/lifecycle"
)

func main() {
	home := flag.String("home", "", "the home")
	registry := flag.String("registry", "", "the registry file; empty: none")
	exclusive := flag.Bool("exclusive", false, "Options.Exclusive")
	server := flag.String("server", "ok", "what NewServer does: ok, nil (a nil server and no error) or fail")
	name := flag.String("name", "mainchild", "Options.Name")
	flag.Parse()
	lifecycle.Main(lifecycle.Options{
		Name:       *name,
		Home:       *home,
		Registry:   *registry,
		NoRegistry: *registry == "",
		Exclusive:  *exclusive,
		NewServer: func(*lifecycle.Env) (*mcp.Server, error) {
			switch *server {
			case "nil":
				return nil, nil
			case "fail":
				return nil, errors.New("mainchild: NewServer fails, as -server fail asks")
			}
			return mcp.NewServer(&mcp.Implementation{Name: "mainchild", Version: "v0"}, nil), nil
		},
	})
	os.Exit(99) // Main does not return
}
