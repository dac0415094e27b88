// Command notes is a small MCP server built on mcpkeep's harness, to copy
// when you start your own: two tools keep one YAML file per note in a
// home that survives crashes, with every change a git commit.
//
//	add_note   {name, title, text}  saves config/notes/<name>.yaml
//	list_notes {}                   returns every note
//
// Its home is $NOTES_HOME, or ~/.notes; MCPKEEP_REGISTRY names the
// discovery registry (empty: none). lifecycle.Main does the rest: the lock,
// install, recovery, stdio, logs on stderr, exit statuses.
package main

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpkeep/mcpkeep/bootstrap"
	"github.com/mcpkeep/mcpkeep/gitstore"
	"github.com/mcpkeep/mcpkeep/lifecycle"
)

// defaults are the files of a new home's config/.
//
//go:embed defaults
var defaults embed.FS

// Note is one file, config/notes/<name>.yaml, and add_note's arguments.
type Note struct {
	Name  string `yaml:"-" json:"name" jsonschema:"the note's file name: 1 to 64 of a-z, 0-9, - and _"`
	Title string `yaml:"title" json:"title"`
	Text  string `yaml:"text" json:"text"`
}

type (
	added struct {
		Commit string `json:"commit"`
	} // the note's commit; "" when it was saved already
	listed struct {
		Notes []Note `json:"notes"`
	}
)

func main() {
	files, _ := fs.Sub(defaults, "defaults") // cannot fail: the directory is embedded
	lifecycle.Main(lifecycle.Options{
		Name:    "notes",
		Version: "v0.1.0",
		Home:    home(),
		Spec: bootstrap.Spec{
			Schema:   1,
			Defaults: files,
			Git:      &gitstore.Options{AuthorName: "notes", AuthorEmail: "notes@localhost"},
		},
		NewServer: newServer,
	})
}

func home() string {
	if h := os.Getenv("NOTES_HOME"); h != "" {
		return h
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".notes")
	}
	return "" // Main says that Options.Home is empty

}

var validName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)

func newServer(env *lifecycle.Env) (*mcp.Server, error) {
	s := mcp.NewServer(&mcp.Implementation{Name: "notes", Version: "v0.1.0"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "add_note", Description: "Save a note; one of the same name is replaced."},
		func(ctx context.Context, _ *mcp.CallToolRequest, n Note) (*mcp.CallToolResult, added, error) {
			if !validName.MatchString(n.Name) {
				return nil, added{}, fmt.Errorf("name %q: use 1 to 64 of a-z, 0-9, - and _", n.Name)
			}
			// Every change is a function env.Update runs with a
			// transaction: durable, all or nothing, and a commit when
			// the tool answers.
			hash, err := env.Update(ctx, "add note "+n.Name, func(tx *lifecycle.Tx) error {
				return tx.WriteYAML("notes/"+n.Name+".yaml", n)
			})
			return nil, added{hash}, env.ToolError(err)
		})
	mcp.AddTool(s, &mcp.Tool{Name: "list_notes", Description: "Return every note."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, listed, error) {
			entries, err := os.ReadDir(filepath.Join(env.ConfigDir, "notes"))
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				return nil, listed{}, env.ToolError(err)
			}
			var notes []Note
			for _, e := range entries {
				name, ok := strings.CutSuffix(e.Name(), ".yaml")
				if !ok || !validName.MatchString(name) {
					continue
				}
				n := Note{Name: name}
				if err := env.Reader().ReadYAML(filepath.Join(env.ConfigDir, "notes", e.Name()), &n); err != nil {
					return nil, listed{}, env.ToolError(err)
				}
				notes = append(notes, n)
			}
			return nil, listed{notes}, nil
		})
	return s, nil
}
