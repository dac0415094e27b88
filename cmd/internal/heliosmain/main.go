// Package heliosmain is helios's command line: the flags, their checks
// and the harness Options they make, run by the two binaries that serve
// helios. cmd/helios links no etcd client, so that a helios on one host
// starts as fast as the harness allows; `mcpkeep helios` links it, and
// cmd/helios runs that when etcd is asked for (Main).
package heliosmain

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/mcpkeep/mcpkeep/bootstrap"
	"github.com/mcpkeep/mcpkeep/cmd/internal/helios"
	"github.com/mcpkeep/mcpkeep/lifecycle"
	"github.com/mcpkeep/mcpkeep/lifecycle/etcdlock/etcdconfig"
	"github.com/mcpkeep/mcpkeep/statefile"
)

// serverName is helios's name as a server: in its home's stamp, the state
// file and the registry.
const serverName = "helios"

// Exit statuses: lifecycle.Main's, and exitUsage for a bad flag.
const (
	exitOK    = lifecycle.ExitOK
	exitError = lifecycle.ExitError
	exitUsage = lifecycle.ExitOptions // Options New refuses come from flags too
)

// NewElector makes the Elector of the etcd cluster cfg names, for the
// server called name; cfg has passed Check and is Enabled. log is the
// server's logger. etcdconfig.New is one (cmd/mcpkeep passes it).
type NewElector func(cfg etcdconfig.Config, name string, log *slog.Logger) (lifecycle.Elector, error)

// Main runs helios with the command-line arguments args (os.Args[1:]) and
// exits with lifecycle.Main's status, or 2 for a bad flag. newElector nil
// means this binary links no etcd client: when the flags, the environment
// or the home's etcd.yaml ask for etcd, Main replaces the process (the
// same PID, stdin, stdout and stderr) with the mcpkeep binary beside this
// executable, running `mcpkeep helios` with the same arguments, which
// calls Main with etcdconfig.New. It exits 1, naming the path it looked at
// and the fix, when that mcpkeep is missing or of another version.
func Main(args []string, newElector NewElector) {
	if newElector != nil {
		if err := CheckVersion(); err != nil {
			fmt.Fprintln(os.Stderr, "helios:", err)
			os.Exit(exitError)
		}
	}
	opts, status := Options(args, os.Stdout, os.Stderr, newElector)
	if opts == nil {
		os.Exit(status)
	}
	lifecycle.Main(*opts)
}

// Options parses helios's command line into the harness's Options, as
// Main does. It returns nil and the exit status when there is nothing to
// run: --help, --version, or a bad flag, which it reports on stderr.
// When etcd is asked for and newElector is nil it does not return: it
// runs the mcpkeep beside this executable (see Main), or returns nil and
// exitError when it cannot.
func Options(args []string, stdout, stderr io.Writer, newElector NewElector) (*lifecycle.Options, int) {
	fs := flag.NewFlagSet("helios", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // a bad flag is one line, below; --help prints the usage
	home := fs.String("home", defaultHome(), "home directory (env HELIOS_HOME); give an absolute path: a relative one is taken from\nthe directory helios starts in, which an MCP client chooses, and ~ is not expanded")
	httpAddr := fs.String("http", "", "also serve Streamable HTTP on this address, e.g. 127.0.0.1:0")
	noStdio := fs.Bool("no-stdio", false, "serve HTTP only and ignore stdin, which then need not be open (nohup, a service manager);\nstop with SIGTERM or SIGINT; needs --http")
	exclusive := fs.Bool("exclusive", false, "exit 3 if the home is in use instead of attaching to the helios running there,\nand take no attached clients")
	registry := fs.String("registry", statefile.DefaultRegistryPath(), "discovery registry file; empty disables (env MCPKEEP_REGISTRY)")
	showVersion := fs.Bool("version", false, "print the version and exit")
	var etcd etcdconfig.Config
	var etcdEndpoints string
	fs.StringVar(&etcdEndpoints, "etcd", "", "elect the home's one writer among hosts with this etcd cluster (comma-separated client URLs);\nthe others are standbys (env "+etcdconfig.EnvEndpoints+", or endpoints in <home>/"+etcdconfig.ConfigFile+")")
	fs.StringVar(&etcd.Prefix, "etcd-prefix", "", "prefix of the keys in etcd (default "+etcdconfig.DefaultPrefix+"; env "+etcdconfig.EnvPrefix+")")
	fs.StringVar(&etcd.Name, "etcd-name", "", "the home's name in etcd, the same on every host (default helios; env "+etcdconfig.EnvName+")")
	fs.DurationVar(&etcd.TTL, "etcd-ttl", 0, "the writer's lease: a writer that stops renewing it is replaced after this, whole seconds\n(default "+etcdconfig.DefaultTTL.String()+"; env "+etcdconfig.EnvTTL+")")
	fs.StringVar(&etcd.CertFile, "etcd-cert", "", "client certificate for etcd (env "+etcdconfig.EnvCert+")")
	fs.StringVar(&etcd.KeyFile, "etcd-key", "", "client certificate's key for etcd (env "+etcdconfig.EnvKey+")")
	fs.StringVar(&etcd.CAFile, "etcd-cacert", "", "CA of etcd's certificates (env "+etcdconfig.EnvCACert+")")
	fs.StringVar(&etcd.Advertise, "advertise", "", "the URL standbys give clients while this host is the writer (default the --http URL;\nenv "+etcdconfig.EnvAdvertise+")")
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
	fs.Usage = func() {}
	usage := func() {
		fs.SetOutput(stderr)
		fmt.Fprintf(stderr, "usage: helios [--home DIR] [--http ADDR [--no-stdio] [--http-...]] [--exclusive] [--remote URL [--remote-mode sync]] [--registry FILE] [--version]\n\n")
		fs.PrintDefaults()
		fmt.Fprintf(stderr, "\nWith etcd (--etcd, %s or the home's %s), helios runs as `%s helios ARGS...`,\n"+
			"the %s installed beside it, which links the etcd client: the same server, the same process.\n",
			etcdconfig.EnvEndpoints, etcdconfig.ConfigFile, Sibling, Sibling)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage()
			return nil, exitOK
		}
		// One line, not the usage, which would bury it in an MCP client's log.
		fmt.Fprintf(stderr, "helios: %s (run helios --help for the flags)\n", asTyped(err, fs, args))
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
		if flagSet(fs, "home") {
			fmt.Fprintln(stderr, "helios: --home is empty: give the home directory, or leave --home out to use $HELIOS_HOME or ~/.helios")
		} else {
			fmt.Fprintln(stderr, "helios: no home: set --home or HELIOS_HOME (no $HOME to default to)")
		}
		return nil, exitUsage
	}
	h := homeArg{from: "--home", given: *home}
	if !flagSet(fs, "home") {
		h.from = ""
		if os.Getenv("HELIOS_HOME") != "" {
			h.from = "HELIOS_HOME"
		}
	}
	if strings.HasPrefix(*home, "~") {
		fmt.Fprintf(stderr, "helios: %s %q starts with ~, which only a shell expands (an MCP client passes it as it is): give the full path%s\n",
			cmp.Or(h.from, "HOME"), *home, expanded(*home))
		return nil, exitUsage
	}
	// A relative --home (or HELIOS_HOME) is relative to the directory
	// helios was started in, as a person typing it in a shell means;
	// lifecycle refuses a relative home, whose meaning would depend on a
	// working directory an MCP client chooses.
	h.path = *home
	if !filepath.IsAbs(h.path) {
		wd, err := os.Getwd()
		if err != nil {
			fmt.Fprintf(stderr, "helios: %s cannot be made absolute (%v): give an absolute path\n", h, err)
			return nil, exitUsage
		}
		h.wd, h.path = wd, filepath.Join(wd, h.path)
	}
	h.path = filepath.Clean(h.path)
	// The home's own problems first: its etcd.yaml is read next.
	if err := h.check(); err != nil {
		fmt.Fprintln(stderr, "helios:", err)
		return nil, exitUsage
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	cfg, err := etcdOf(fs, h.path, etcdEndpoints, etcd)
	if err != nil {
		fmt.Fprintln(stderr, "helios:", err)
		return nil, exitUsage
	}
	var elector lifecycle.Elector
	if cfg.Enabled() {
		if newElector == nil {
			// Does not return unless it fails.
			err := execWithEtcd(args)
			fmt.Fprintln(stderr, "helios:", err)
			return nil, exitError
		}
		if elector, err = newElector(cfg, "helios", log); err != nil {
			fmt.Fprintln(stderr, "helios:", err)
			return nil, exitUsage
		}
	}
	if h.wd != "" {
		// Each client that starts helios in another directory gets another
		// home: say which one this is.
		log.Warn(cmp.Or(h.from, "the home")+" is relative to the directory the MCP client started helios in: "+
			"a client started in another directory uses another home", "home", h.path, "given", h.given, "wd", h.wd)
	}
	return &lifecycle.Options{
		Name:         serverName,
		Version:      helios.Version(),
		Home:         h.path,
		Spec:         helios.Spec(),
		NewServer:    helios.NewServer,
		Warm:         helios.Warm,
		HTTP:         *httpAddr,
		NoStdio:      *noStdio,
		HTTPLimits:   limits,
		HTTPMode:     httpMode,
		Exclusive:    *exclusive,
		Registry:     *registry,
		NoRegistry:   *registry == "",
		Validate:     helios.Validate,
		Elector:      elector,
		AdvertiseURL: cfg.Advertise,
		Remote:       remote,
		Logger:       log,
	}, exitOK
}

// etcdOf returns the etcd settings the flags, the environment and the
// home's etcd.yaml give, in that order of precedence, checked: a Config
// that is not Enabled when none names an etcd cluster.
func etcdOf(fs *flag.FlagSet, home, endpoints string, flags etcdconfig.Config) (etcdconfig.Config, error) {
	cfg, err := etcdconfig.LoadConfig(home, nil)
	if err != nil {
		return etcdconfig.Config{}, err
	}
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "etcd":
			cfg.Endpoints = etcdconfig.SplitEndpoints(endpoints)
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
			return etcdconfig.Config{}, errors.New("--advertise (or " + etcdconfig.EnvAdvertise + ") needs --etcd: only an elected writer advertises its URL")
		}
		return cfg, nil
	}
	if err := cfg.Check("helios"); err != nil {
		return etcdconfig.Config{}, err
	}
	return cfg, nil
}

// asTyped returns the message of err, fs.Parse(args)'s error, with the
// flag it names written as args wrote it: the flag package names it with
// one dash ("flag provided but not defined: -hom") whatever was typed.
func asTyped(err error, fs *flag.FlagSet, args []string) string {
	msg := err.Error()
	// The flag that failed is the last one Parse took: it stops at the
	// error, leaving the arguments after it in fs.Args().
	var typed, name string
	for i := 0; i < len(args)-len(fs.Args()); i++ {
		s := args[i]
		if len(s) < 2 || s[0] != '-' {
			continue
		}
		dashes := "-"
		if s[1] == '-' {
			dashes = "--"
		}
		n, _, hasValue := strings.Cut(s[len(dashes):], "=")
		typed, name = dashes+n, n
		if f := fs.Lookup(n); f != nil && !hasValue && !isBool(f) {
			i++ // its value
		}
	}
	if typed == "" || typed == "-"+name {
		return msg
	}
	if m, ok := strings.CutSuffix(msg, " -"+name); ok {
		return m + " " + typed
	}
	return strings.Replace(msg, " -"+name+":", " "+typed+":", 1)
}

// isBool reports whether f is a flag that takes no value, such as --exclusive.
func isBool(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// httpModes are the values of --http-mode.
var httpModes = map[string]lifecycle.HTTPMode{
	"both":      lifecycle.HTTPModeBoth,
	"sessions":  lifecycle.HTTPModeSessions,
	"stateless": lifecycle.HTTPModeStateless,
}

// flagSet reports whether the command line set the flag name.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// expanded suggests, for a home written with ~ or ~/..., the path a shell
// would have made of it: ", such as /home/me/x", or "" when it cannot tell.
func expanded(home string) string {
	rest, ok := strings.CutPrefix(home, "~")
	if !ok || (rest != "" && rest[0] != '/') {
		return "" // ~user/...: another user's home
	}
	user, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	return ", such as " + filepath.Join(user, rest)
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
