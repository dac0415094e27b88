// Command heliosnext is the crash suite's stand-in for the next release of
// helios: a server on the same harness whose config schema is 2, with one
// migration from helios's schema 1. helios itself has one schema and so
// never migrates; the suite upgrades homes helios installed with this
// program to crash the harness at bootstrap.before-migration and
// bootstrap.after-migration, then checks that nothing helios acknowledged
// was lost. It is a test program, not a product.
//
// Usage:
//
//	heliosnext --home DIR --registry FILE
//
// It serves MCP over stdio with one tool, get_notes, until stdin closes.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpkeep/mcpkeep/atomicfile"
	"github.com/mcpkeep/mcpkeep/bootstrap"
	"github.com/mcpkeep/mcpkeep/lifecycle"
)

// NotesFile is the file migration v1→v2 adds to config/.
const NotesFile = "notes.yaml"

type notes struct {
	MigratedFrom int      `yaml:"migrated_from" json:"migrated_from"`
	Notes        []string `yaml:"notes" json:"notes"`
}

func main() {
	home := flag.String("home", "", "home directory (required)")
	registry := flag.String("registry", "", "discovery registry file (required)")
	flag.Parse()
	if *home == "" || *registry == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: heliosnext --home DIR --registry FILE")
		os.Exit(2)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	h, err := lifecycle.New(lifecycle.Options{
		Name:    "helios", // the next version of the same server: the home's stamp names helios
		Version: "v2-test",
		Home:    *home,
		Spec: bootstrap.Spec{
			Schema: 2,
			Migrations: []bootstrap.Migration{{
				From: 1, To: 2, Name: "add-notes",
				Apply: func(ctx context.Context, configDir string) error {
					return atomicfile.WriteYAML(filepath.Join(configDir, NotesFile), notes{MigratedFrom: 1, Notes: []string{}}, 0o600)
				},
			}},
			Validate: func(configDir string) error {
				var n notes
				return atomicfile.ReadYAMLStrict(filepath.Join(configDir, NotesFile), &n)
			},
		},
		NewServer: newServer,
		Registry:  *registry,
		Logger:    log,
	})
	if err == nil {
		err = h.Run(context.Background())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "heliosnext:", err)
		if errors.Is(err, lifecycle.ErrLocked) {
			os.Exit(3)
		}
		os.Exit(1)
	}
}

func newServer(env *lifecycle.Env) (*mcp.Server, error) {
	s := mcp.NewServer(&mcp.Implementation{Name: "heliosnext", Version: "v2-test"}, &mcp.ServerOptions{Logger: env.Logger})
	mcp.AddTool(s, &mcp.Tool{Name: "get_notes", Description: "Read config/notes.yaml, which the v1→v2 migration added."},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, notes, error) {
			var n notes
			err := atomicfile.ReadYAMLStrict(filepath.Join(env.ConfigDir, NotesFile), &n)
			return nil, n, err
		})
	return s, nil
}
