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
	"github.com/mcpkeep/mcpkeep/internal/buildinfo"
)

// Version is the version helios reports in its MCP server info and state
// file: the mcpkeep module's, as a release build stamped it ("v1.2.3"),
// else the module version the build recorded, or "devel".
// bootstrap.ToolkitVersion says the same with the commit and, for a build
// that is not a release, where it came from.
func Version() string { return buildinfo.Read().Version }

// Spec is the bootstrap.Spec of a helios home: its schema, default files
// and the check run after migrations. Home and Logger are left to the
// caller (lifecycle.Harness fills them in).
func Spec() bootstrap.Spec {
	return bootstrap.Spec{Schema: Schema, Defaults: Defaults, Validate: ValidateDir}
}
