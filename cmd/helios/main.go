// Command helios is an example MCP server built on mcpkeep's harness: it
// keeps personas and preferences as YAML in a git-versioned home, survives
// being killed at any moment, and keeps one writer per home however many
// clients launch it.
//
// Usage:
//
//	helios [--home DIR] [--http ADDR [--no-stdio] [--http-...]] [--exclusive] [--remote URL [--remote-mode sync]] [--registry FILE] [--version]
//
// It speaks MCP over stdio (launch it from an MCP client) and, with --http,
// over Streamable HTTP on ADDR (127.0.0.1:0 picks a port; the URL and bearer
// token are in <home>/state.json); the --http-* flags set the limits on
// what HTTP clients can hold (lifecycle.HTTPLimits) and which clients it
// serves (lifecycle.HTTPMode). --remote replicates the config through a
// git remote (lifecycle.RemoteOptions). It stops when stdin ends, the client
// being gone; --no-stdio serves HTTP alone and ignores stdin, for running
// under nohup or a service manager, and stops on SIGTERM, SIGINT or SIGHUP
// (not under nohup, which ignores SIGHUP). A helios
// launched on a home in use attaches to the one running there and serves
// its client through it (--http is then bound only if it becomes the
// writer); --exclusive exits 3 instead. Logs go to stderr. Exit status: 0
// after a clean stop, 1 on error, 2 on bad usage, 3 when the home is in use
// and this one cannot attach to it (--exclusive, --no-stdio, another user).
//
// helios links no etcd client. With --etcd (or MCPKEEP_ETCD_ENDPOINTS, or
// the home's etcd.yaml) it replaces itself, keeping its PID, stdin and
// stdout, with the mcpkeep installed beside it running `mcpkeep helios`
// with the same arguments: the same server, with the etcd election. Every
// release package ships the two side by side; a helios without its mcpkeep,
// or with one of another version, exits 1 saying where it looked.
package main

import (
	"os"

	"github.com/mcpkeep/mcpkeep/cmd/internal/heliosmain"
)

func main() {
	heliosmain.Main(os.Args[1:], nil)
}
