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
package main

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/mcpkeep/mcpkeep/bootstrap"
	"github.com/mcpkeep/mcpkeep/cmd/internal/helios"
	"github.com/mcpkeep/mcpkeep/lifecycle"
	"github.com/mcpkeep/mcpkeep/lifecycle/etcdlock"
	"github.com/mcpkeep/mcpkeep/statefile"
)

// Exit statuses: lifecycle.Main's, and exitUsage for a bad flag.
const (
	exitOK    = lifecycle.ExitOK
	exitError = lifecycle.ExitError
	exitUsage = lifecycle.ExitOptions // Options New refuses come from flags too
	exitInUse = lifecycle.ExitInUse
)

func main() {
	opts, status := options(os.Args[1:], os.Stdout, os.Stderr)
	if opts == nil {
		os.Exit(status)
	}
	lifecycle.Main(*opts)
}

// options parses helios's command line into the harness's Options. It
// returns nil and the exit status when there is nothing to run: --help,
// --version, or a bad flag, which it reports on stderr.
func options(args []string, stdout, stderr io.Writer) (*lifecycle.Options, int) {
	fs := flag.NewFlagSet("helios", flag.ContinueOnError)
	fs.SetOutput(stderr)
	home := fs.String("home", defaultHome(), "home directory (env HELIOS_HOME)")
	httpAddr := fs.String("http", "", "also serve Streamable HTTP on this address, e.g. 127.0.0.1:0")
	noStdio := fs.Bool("no-stdio", false, "serve HTTP only and ignore stdin, which then need not be open (nohup, a service manager);\nstop with SIGTERM or SIGINT; needs --http")
	exclusive := fs.Bool("exclusive", false, "exit 3 if the home is in use instead of attaching to the helios running there,\nand take no attached clients")
	registry := fs.String("registry", statefile.DefaultRegistryPath(), "discovery registry file; empty disables (env MCPKEEP_REGISTRY)")
	showVersion := fs.Bool("version", false, "print the version and exit")
	var etcd etcdlock.Config
	var etcdEndpoints string
	fs.StringVar(&etcdEndpoints, "etcd", "", "elect the home's one writer among hosts with this etcd cluster (comma-separated client URLs);\nthe others are standbys (env "+etcdlock.EnvEndpoints+", or endpoints in <home>/"+etcdlock.ConfigFile+")")
	fs.StringVar(&etcd.Prefix, "etcd-prefix", "", "prefix of the keys in etcd (default "+etcdlock.DefaultPrefix+"; env "+etcdlock.EnvPrefix+")")
	fs.StringVar(&etcd.Name, "etcd-name", "", "the home's name in etcd, the same on every host (default helios; env "+etcdlock.EnvName+")")
	fs.DurationVar(&etcd.TTL, "etcd-ttl", 0, "the writer's lease: a writer that stops renewing it is replaced after this, whole seconds\n(default "+etcdlock.DefaultTTL.String()+"; env "+etcdlock.EnvTTL+")")
	fs.StringVar(&etcd.CertFile, "etcd-cert", "", "client certificate for etcd (env "+etcdlock.EnvCert+")")
	fs.StringVar(&etcd.KeyFile, "etcd-key", "", "client certificate's key for etcd (env "+etcdlock.EnvKey+")")
	fs.StringVar(&etcd.CAFile, "etcd-cacert", "", "CA of etcd's certificates (env "+etcdlock.EnvCACert+")")
	fs.StringVar(&etcd.Advertise, "advertise", "", "the URL standbys give clients while this host is the writer (default the --http URL;\nenv "+etcdlock.EnvAdvertise+")")
	var limits lifecycle.HTTPLimits
	mode := fs.String("http-mode", "both", "which MCP clients HTTP serves: both (initialize-era ones with sessions, and 2026-07-28 ones),\nsessions (initialize-era only) or stateless (every request without a session)")
	fs.DurationVar(&limits.SessionIdleTimeout, "http-session-idle", lifecycle.DefaultHTTPSessionIdleTimeout, "close an HTTP session idle this long; negative: never")
	fs.IntVar(&limits.MaxSessions, "http-max-sessions", lifecycle.DefaultHTTPMaxSessions, "most live HTTP sessions (the idlest is closed to make room); negative: no cap")
	fs.IntVar(&limits.MaxConnections, "http-max-conns", lifecycle.DefaultHTTPMaxConnections, "most open HTTP connections (the quietest is closed to make room); negative: no cap")
	fs.DurationVar(&limits.ReadHeaderTimeout, "http-header-timeout", lifecycle.DefaultHTTPReadHeaderTimeout, "time a connection has to send a request's headers; negative: no limit")
	fs.DurationVar(&limits.IdleTimeout, "http-idle-timeout", lifecycle.DefaultHTTPIdleTimeout, "close a keep-alive connection idle this long; negative: never")
	fs.DurationVar(&limits.BodyReadTimeout, "http-body-timeout", lifecycle.DefaultHTTPBodyReadTimeout, "time a POST has to send its body; negative: no limit")
	fs.IntVar(&limits.MaxBatch, "http-max-batch", lifecycle.DefaultHTTPMaxBatch, "most messages in a JSON-RPC batch (protocol 2025-03-26 and older); negative: no cap")
	var remote lifecycle.RemoteOptions // the environment fills what the flags leave empty, below: a URL's password is never a flag default --help prints
	fs.StringVar(&remote.URL, "remote", "", "replicate the config through this git remote (file://, https://, ssh://); default: env MCPKEEP_REMOTE,\nelse the home's config/.git remote \"origin\"; credentials from MCPKEEP_GIT_USERNAME/MCPKEEP_GIT_PASSWORD,\nMCPKEEP_GIT_SSH_KEY or the ssh agent")
	fs.StringVar(&remote.Mode, "remote-mode", "", "async (a change is answered once durable here, pushed in the background) or sync (answered once the remote has it);\ndefault: env MCPKEEP_REMOTE_MODE, else the home's mcpkeep.remote.mode, else async")
	fs.DurationVar(&remote.Interval, "remote-interval", 0, "how often to fetch and merge the remote (default: env MCPKEEP_REMOTE_INTERVAL, else the home's, else 30s)")
	fs.BoolVar(&remote.Off, "no-remote", false, "do not replicate, even if the home names a remote")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: helios [--home DIR] [--http ADDR [--no-stdio] [--http-...]] [--exclusive] [--remote URL [--remote-mode sync]] [--registry FILE] [--version]\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, exitOK
		}
		return nil, exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "helios: unexpected argument %q (see helios --help)\n", fs.Arg(0))
		return nil, exitUsage
	}
	remoteEnv, err := lifecycle.RemoteFromEnv()
	if err != nil {
		fmt.Fprintln(stderr, "helios:", err)
		return nil, exitUsage
	}
	remote.URL = cmp.Or(remote.URL, remoteEnv.URL)
	remote.Mode = cmp.Or(remote.Mode, remoteEnv.Mode)
	remote.Interval = cmp.Or(remote.Interval, remoteEnv.Interval)
	if remote.Mode != "" && remote.Mode != "async" && remote.Mode != "sync" {
		fmt.Fprintf(stderr, "helios: --remote-mode %q is neither async nor sync (see helios --help)\n", remote.Mode)
		return nil, exitUsage
	}
	if *showVersion {
		// --version is the one thing printed to stdout: no transport runs.
		// The version with its commit, or for a local build where it came
		// from: "helios v1.2.3 (commit 1a2b3c4d5e6f)".
		fmt.Fprintln(stdout, "helios", bootstrap.ToolkitVersion())
		return nil, exitOK
	}
	httpMode, ok := httpModes[*mode]
	if !ok {
		fmt.Fprintf(stderr, "helios: --http-mode %q is not one of both, sessions, stateless (see helios --help)\n", *mode)
		return nil, exitUsage
	}
	if *noStdio && *httpAddr == "" {
		fmt.Fprintln(stderr, "helios: --no-stdio needs --http ADDR: without stdio, HTTP is the only transport (see helios --help)")
		return nil, exitUsage
	}
	if *home == "" {
		homeGiven := false
		fs.Visit(func(f *flag.Flag) { homeGiven = homeGiven || f.Name == "home" })
		if homeGiven {
			fmt.Fprintln(stderr, "helios: --home is empty: give the home directory, or leave --home out to use $HELIOS_HOME or ~/.helios")
		} else {
			fmt.Fprintln(stderr, "helios: no home: set --home or HELIOS_HOME (no $HOME to default to)")
		}
		return nil, exitUsage
	}
	// A relative --home (or HELIOS_HOME) is relative to the directory
	// helios was started in, as a person typing it in a shell means;
	// lifecycle refuses a relative home, whose meaning would depend on a
	// working directory an MCP client chooses.
	abs, err := filepath.Abs(*home)
	if err != nil {
		fmt.Fprintf(stderr, "helios: --home %q cannot be made absolute (%v): give an absolute path\n", *home, err)
		return nil, exitUsage
	}
	*home = abs
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	elector, advertise, err := electorOf(fs, *home, etcdEndpoints, etcd, log)
	if err != nil {
		fmt.Fprintln(stderr, "helios:", err)
		return nil, exitUsage
	}
	return &lifecycle.Options{
		Name:         "helios",
		Version:      helios.Version(),
		Home:         *home,
		Spec:         helios.Spec(),
		NewServer:    helios.NewServer,
		HTTP:         *httpAddr,
		NoStdio:      *noStdio,
		HTTPLimits:   limits,
		HTTPMode:     httpMode,
		Exclusive:    *exclusive,
		Registry:     *registry,
		NoRegistry:   *registry == "",
		Validate:     helios.Validate,
		Elector:      elector,
		AdvertiseURL: advertise,
		Remote:       remote,
		Logger:       log,
	}, exitOK
}

// electorOf returns the etcd Elector the flags, the environment and the
// home's etcd.yaml ask for, in that order of precedence, and the URL to
// advertise; a nil Elector when none names an etcd cluster.
func electorOf(fs *flag.FlagSet, home, endpoints string, flags etcdlock.Config, log *slog.Logger) (lifecycle.Elector, string, error) {
	cfg, err := etcdlock.LoadConfig(home, nil)
	if err != nil {
		return nil, "", err
	}
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "etcd":
			cfg.Endpoints = etcdlock.SplitEndpoints(endpoints)
		case "etcd-prefix":
			cfg.Prefix = flags.Prefix
		case "etcd-name":
			cfg.Name = flags.Name
		case "etcd-ttl":
			cfg.TTL = flags.TTL
		case "etcd-cert":
			cfg.CertFile = flags.CertFile
		case "etcd-key":
			cfg.KeyFile = flags.KeyFile
		case "etcd-cacert":
			cfg.CAFile = flags.CAFile
		case "advertise":
			cfg.Advertise = flags.Advertise
		}
	})
	if !cfg.Enabled() {
		if cfg.Advertise != "" {
			return nil, "", errors.New("--advertise (or " + etcdlock.EnvAdvertise + ") needs --etcd: only an elected writer advertises its URL")
		}
		return nil, "", nil
	}
	el, err := etcdlock.New(cfg, "helios", log)
	if err != nil {
		return nil, "", err
	}
	return el, cfg.Advertise, nil
}

// httpModes are the values of --http-mode.
var httpModes = map[string]lifecycle.HTTPMode{
	"both":      lifecycle.HTTPModeBoth,
	"sessions":  lifecycle.HTTPModeSessions,
	"stateless": lifecycle.HTTPModeStateless,
}

func defaultHome() string {
	if h := os.Getenv("HELIOS_HOME"); h != "" {
		return h
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".helios")
	}
	return ""
}
