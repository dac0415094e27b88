// Command harnessprog is a server on lifecycle's harness for crashtest's
// tests of what the phases' docs tell a Plan to do (PhaseAttach,
// PhasePack). Its one tool, put {"key", "value"}, writes value to the
// file keys/KEY of the home's config through lifecycle.Env.Update, a
// change of one file: a blob, two trees and a commit.
//
// Environment: HARNESSPROG_HOME is the home (required); HARNESSPROG_PACK
// the config repository's Spec.Git.PackThreshold (0: the default);
// MCPKEEP_REGISTRY as for every server on the harness.
package main

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"testing/fstest"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpkeep/mcpkeep/bootstrap"
	"github.com/mcpkeep/mcpkeep/gitstore"
	"github.com/mcpkeep/mcpkeep/lifecycle"
)

type put struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

type committed struct {
	Commit string `json:"commit"`
}

var validKey = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)

func main() {
	pack, err := strconv.Atoi(os.Getenv("HARNESSPROG_PACK"))
	if err != nil && os.Getenv("HARNESSPROG_PACK") != "" {
		fmt.Fprintln(os.Stderr, "harnessprog: HARNESSPROG_PACK:", err)
		os.Exit(2)
	}
	lifecycle.Main(lifecycle.Options{
		Name:    "harnessprog",
		Version: "v0.0.0",
		Home:    os.Getenv("HARNESSPROG_HOME"),
		Spec: bootstrap.Spec{
			Schema:   1,
			Defaults: fstest.MapFS{"README": {Data: []byte("harnessprog's home\n")}},
			Git:      &gitstore.Options{AuthorName: "harnessprog", AuthorEmail: "harnessprog@localhost", PackThreshold: pack},
		},
		NewServer: func(env *lifecycle.Env) (*mcp.Server, error) {
			s := mcp.NewServer(&mcp.Implementation{Name: "harnessprog", Version: "v0.0.0"}, nil)
			mcp.AddTool(s, &mcp.Tool{Name: "put", Description: "Write value to keys/KEY."},
				func(ctx context.Context, _ *mcp.CallToolRequest, p put) (*mcp.CallToolResult, committed, error) {
					if !validKey.MatchString(p.Key) {
						return nil, committed{}, fmt.Errorf("key %q: use 1 to 64 of a-z, 0-9, - and _", p.Key)
					}
					hash, err := env.Update(ctx, "put "+p.Key, func(tx *lifecycle.Tx) error {
						return tx.WriteFile("keys/"+p.Key, []byte(p.Value+"\n"))
					})
					return nil, committed{hash}, env.ToolError(err)
				})
			return s, nil
		},
	})
}
