// Package helios is the helios example server without its main: the layout
// of its config files (config/base.yaml and config/personas/*.yaml, with
// embedded defaults) and its MCP tools, which cmd/helios serves on the
// lifecycle.Harness and internal/cmd/bare-helios, the reference for the
// cold-start benchmark, serves with no harness. Every mutation goes through lifecycle.Env.Update, so
// it is checkpointed, written atomically and committed before a tool
// returns.
package helios

import (
	"github.com/mcpkeep/mcpkeep/bootstrap"
)

// Version is the version helios reports: the mcpkeep module's.
func Version() string { return bootstrap.ToolkitVersion() }

// Spec is the bootstrap.Spec of a helios home: its schema, default files
// and the check run after migrations. Home and Logger are left to the
// caller (lifecycle.Harness fills them in).
func Spec() bootstrap.Spec {
	return bootstrap.Spec{Schema: Schema, Defaults: Defaults, Validate: ValidateDir}
}
