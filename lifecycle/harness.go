package lifecycle

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpkeep/mcpkeep/bootstrap"
	"github.com/mcpkeep/mcpkeep/lifecycle/internal/mcpserve"
)

// Defaults for Options fields left zero.
const (
	DefaultHealthInterval  = 30 * time.Second
	DefaultShutdownTimeout = 5 * time.Second
)

// Options configure a Harness. The zero value of every field but Name, Home
// and NewServer is a sensible default. New and Run refuse a value they
// cannot use with an *OptionsError naming the field.
type Options struct {
	Name    string // server name, in the state file and the registry
	Version string // server version
	// Home is the home directory, an absolute path (a relative one is
	// refused: an MCP client that launches the server chooses its working
	// directory); created 0700 if missing; "~" is not expanded.
	Home string

	// Spec describes the home's schema, default files and migrations. Its
	// Home and Logger are filled in from these Options. The zero Spec is
	// schema 1, with no default files and no migrations. Spec.Git, if set,
	// gives every commit of the config repository its author (the install,
	// the server's changes, recovery's and shutdown's commits) and sets
	// when it packs (PackThreshold); the harness holds the lock, writes,
	// and reads at most MaxFileSize whatever Spec.Git says, and stamps
	// MaxFileSize, not Spec.MaxFileSize, in the boot record.
	Spec bootstrap.Spec

	// NewServer builds the MCP server once the home is ready and locked.
	// It returns the server or an error; a nil server with no error, or
	// a panic (mcp.AddTool's, on a tool whose argument type is not a
	// struct), is Run's *OptionsError, and the home is left unlocked. A
	// tool that panics while serving fails its call with a tool error
	// saying so (the stack goes to Logger), and the server serves on.
	NewServer func(*Env) (*mcp.Server, error)
	// Warm, if set, runs in a goroutine of its own as soon as this
	// process becomes the writer, beside bootstrap, recovery and the
	// binding of the transports, which NewServer comes after. It is for
	// the part of building the server that needs nothing from the home,
	// which then overlaps with them on another core: chiefly the go-sdk's
	// inference of the tools' schemas (most of a small server's start),
	// by adding the tools to a throwaway server that shares an
	// mcp.SchemaCache with the one NewServer builds
	// (mcp.ServerOptions.SchemaCache), as ExampleOptions_warm (in
	// lifecycle's example_test.go) shows. Run does not wait for it:
	// NewServer may run while Warm still does, sharing its work through
	// the cache, and Warm may still run when Run returns. It must not
	// touch the home: it runs beside recovery, which would take a file it
	// wrote into config/ for a hand edit and commit it. A panic in it is
	// logged and otherwise ignored. A process that attaches to the writer
	// does not call it; one that takes over from the writer does.
	Warm func()

	// NoStdio turns the stdio transport off (it is on by default). A
	// process without stdio has no client to attach, so on a home in use
	// Run returns the *LockedError.
	NoStdio bool
	// Exclusive keeps the home to one client: on a home in use Run returns
	// the *LockedError at once instead of attaching to the writer, and as
	// the writer it takes no attached clients (it listens on no socket).
	Exclusive bool
	// HTTP is the Streamable HTTP address: "" = off, "127.0.0.1:0" = any
	// port. A non-loopback host must be given explicitly and still requires
	// the bearer token.
	HTTP string
	// NoToken switches the bearer token off. It is refused unless HTTP is on
	// a loopback address. Host and Origin checks stay on.
	NoToken bool
	// HTTPLimits bound what HTTP clients can hold: sessions, connections,
	// time to send a request, body and batch sizes. Zero fields take the
	// defaults documented on HTTPLimits.
	HTTPLimits HTTPLimits
	// HTTPMode says which kinds of MCP client HTTP serves; the zero value,
	// HTTPModeBoth, serves initialize-era and 2026-07-28 clients alike.
	HTTPMode HTTPMode

	// Registry is the discovery registry file, shared by every mcpkeep
	// server of the user: a running server lists itself there, for
	// `mcpkeep servers`, and takes its entry out when it stops. ""
	// means statefile.DefaultRegistryPath(): $MCPKEEP_REGISTRY if set,
	// else the user's ~/.local/state/mcpkeep/servers.json (or under
	// $XDG_STATE_HOME), so every run writes there unless told otherwise.
	// A test keeps its servers out of the user's registry with
	// MCPKEEP_REGISTRY set to a file of its own, or to "" for none.
	Registry string
	// NoRegistry switches the registry off: the server is not listed by
	// `mcpkeep servers`. MCPKEEP_REGISTRY set to "" does the same.
	NoRegistry bool

	// Elector, if set, makes this server one of several hosts' servers of
	// one home, of which the one the Elector elects is the active writer
	// (package lifecycle/etcdlock elects with an etcd lease). The others
	// are standbys: they refuse MCP requests (HTTP with 503 and the active
	// writer's URL) and campaign, and one becomes active when the
	// writer's lease ends. A change is made and acknowledged only while
	// the term holds (Env.Update says how). The home lock still decides
	// which process of a host takes part. Run closes the Elector when it
	// returns.
	Elector Elector
	// AdvertiseURL is the URL the active writer publishes through the
	// Elector, which standbys give clients: "" means the HTTP URL it
	// serves, with this machine's host name for an address bound to every
	// interface (0.0.0.0).
	AdvertiseURL string
	// BeforeActive, if set, runs each time the Elector elects this server,
	// before it serves as the active writer: changes are refused until it
	// returns nil. An error resigns the term, to campaign again. A home
	// replicated through a git remote catches up with it here first.
	BeforeActive func(ctx context.Context, env *Env) error
	// Remote replicates the config repository through a git remote;
	// zero fields take the home's own setting, and with no URL in either
	// there is none (see RemoteOptions).
	Remote RemoteOptions

	// Validate, if set, checks each config file beyond its syntax (path
	// relative to ConfigDir): start-up recovery quarantines a file it
	// refuses, so a transaction refuses to write one (Env.Validate), and
	// a file of Spec.Defaults it refuses is an *OptionsError at start.
	Validate func(path string, data []byte) error
	// MaxFileSize is the largest config file read, in bytes (recovery,
	// commits, Env.Reader): 0 means atomicfile.DefaultMaxSize (1 MiB), a
	// negative value no limit. Each start records it in the home's boot
	// record (bootstrap.Info.MaxFileSize), where OpenHome and the mcpkeep
	// commands (doctor, history, rollback, sync) read it, so that they
	// refuse, and quarantine, only what this server would.
	MaxFileSize int64

	HealthInterval time.Duration // default DefaultHealthInterval
	// ShutdownTimeout bounds how long a stop (stdin's end, SIGTERM,
	// SIGINT, SIGHUP, ctx) waits for the tool calls in flight, of every
	// client (stdio, HTTP, attached); default DefaultShutdownTimeout. A
	// tool that ignores its context is waited for one second more, then
	// logged by name ("tool X still running after ShutdownTimeout;
	// exiting without it") and left behind: Run commits (waiting at most
	// ShutdownTimeout more for a call left inside an Update's function,
	// which holds the config: hand edits then wait for the next start),
	// releases the state file, the registry entry and the lock, and
	// returns, so the process exits. That is a crash for that call: its
	// change is all or nothing, the next start recovers it, and no change
	// acknowledged to a client is lost.
	ShutdownTimeout time.Duration
	Logger          *slog.Logger // nil = discard; binaries pass a stderr logger

	// Stdin replaces os.Stdin for the stdio transport (tests).
	Stdin io.Reader
	// Stdout replaces os.Stdout for the stdio transport (tests).
	Stdout io.Writer
	// NoSignals stops Run and Main from handling signals themselves:
	// SIGINT, SIGTERM and SIGHUP, which stop the server, and SIGPIPE,
	// which they keep from killing it (see Run).
	NoSignals bool
}

// Harness runs one MCP server on one home: see Run.
type Harness struct {
	opts      Options
	log       *slog.Logger
	httpStats *mcpserve.Stats // the HTTP transport's counts, for /healthz and the state file
	started   func()          // Main's end of the start (gcpace.go); nil: nothing to do
}

// New returns a Harness for opts. It checks opts, returning an
// *OptionsError that names the field for one it cannot use, but does no
// I/O.
func New(opts Options) (*Harness, error) {
	if err := opts.check(); err != nil {
		return nil, err
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	abs, err := filepath.Abs(opts.Home)
	if err != nil {
		return nil, &OptionsError{Field: "Home", Problem: fmt.Sprintf("%q cannot be made absolute: give an absolute path", opts.Home), Err: err}
	}
	opts.Home = abs
	return &Harness{opts: opts, log: log.With("home", abs), httpStats: new(mcpserve.Stats)}, nil
}
