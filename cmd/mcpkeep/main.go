// Command mcpkeep inspects and repairs the home of any server built on
// mcpkeep, without the server's help.
//
// Usage:
//
//	mcpkeep status   [--home DIR] [--json]
//	mcpkeep servers  [--registry FILE] [--json]
//	mcpkeep doctor   [--home DIR] [--fix] [--json]
//	mcpkeep history  [--home DIR] [PATH] [-n N] [--json]
//	mcpkeep rollback [--home DIR] REV [--json]
//	mcpkeep sync     [--home DIR] [--remote URL] [--resolve TAG] [--json]
//	mcpkeep version  [--json]   (or mcpkeep --version)
//	mcpkeep helios   [helios's flags]
//
// --home defaults to $MCPKEEP_HOME, then $HELIOS_HOME, then ~/.helios.
// Exit status: 0 ok, 1 error or, for status and doctor, problems found
// (listed in the output, which is printed all the same: for status, the
// stale lock or state file of a server that is not running is one), 2
// usage, 3 the home is in use by a live server (doctor --fix, rollback and
// sync refuse to write beside it; sync prints the server's own last sync).
// No command prints a bearer token, nor log lines: what a command repairs
// on its way, such as a dead server's lock, is part of its output ("note:"
// lines, or "notes" in JSON), and stderr carries one line, for an error.
// With --json, a command that fails before it printed its output prints
// the error on stdout too, as {"error": "...", "home": "..."} (home,
// absolute, for a command given one), with the same exit status. In status
// --json, server.http_sessions and server.http_connections are as of
// server.health.checked_at, the last health check; server.alive is false
// for a stale state file, whose last records are under server.stale.
//
// mcpkeep helios is the helios MCP server itself, with helios's flags, its
// exit statuses and its logs, linked with the etcd client: helios, which
// links none so as to start fast, runs it (in its own process, by exec)
// when --etcd, MCPKEEP_ETCD_ENDPOINTS or the home's etcd.yaml asks for an
// etcd election, and refuses to if this mcpkeep is not of its version.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/mcpkeep/mcpkeep/bootstrap"
	"github.com/mcpkeep/mcpkeep/cmd/internal/heliosmain"
	"github.com/mcpkeep/mcpkeep/internal/buildinfo"
	"github.com/mcpkeep/mcpkeep/lifecycle"
	"github.com/mcpkeep/mcpkeep/lifecycle/etcdlock"
)

// Exit statuses.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
	exitInUse = 3
)

// commands are the CLI's commands with their arguments, for the usage.
var commands = []struct{ name, args, about string }{
	{"status", "[--home DIR]", "is the home installed, locked, serving (its writer and attached clients), healthy, committed?"},
	{"servers", "[--registry FILE]", "list the live servers in the discovery registry"},
	{"doctor", "[--home DIR] [--fix]", "check the home; --fix repairs it (refused while a server runs)"},
	{"history", "[--home DIR] [PATH] [-n N]", "commits that changed the config (or PATH)"},
	{"rollback", "[--home DIR] REV", "make the config equal to REV as a new commit"},
	{"sync", "[--home DIR] [--remote URL]", "fetch and merge the git remote, push, show ahead/behind/conflicts"},
	{"version", "", "print mcpkeep's version (also mcpkeep --version)"},
}

var usage = func() string {
	var b strings.Builder
	b.WriteString("usage: mcpkeep COMMAND [flags]\n\ncommands:\n")
	for _, c := range commands {
		fmt.Fprintf(&b, "  %-8s %-28s %s\n", c.name, c.args, c.about)
	}
	fmt.Fprintf(&b, "  %-8s %-28s %s\n", "helios", "[helios's flags]", "run the helios MCP server, with etcd (helios runs this for --etcd)")
	b.WriteString("\nevery command but helios takes --json; with it, an error is also {\"error\", \"home\"} on stdout.\n")
	b.WriteString(exitText)
	return b.String()
}()

// exitText documents the exit statuses, for the usages.
const exitText = "exit status: 0 ok; 1 an error, or problems status or doctor found (and listed),\n" +
	"such as the stale lock or state file of a server that is not running; 2 bad usage;\n" +
	"3 the home is in use by a live server (doctor --fix, rollback, sync).\n"

func main() {
	if len(os.Args) > 1 && os.Args[1] == "helios" {
		heliosmain.Main(os.Args[2:], newElector) // does not return
	}
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

// newElector is etcdlock.New, for `mcpkeep helios`.
func newElector(cfg etcdlock.Config, name string, log *slog.Logger) (lifecycle.Elector, error) {
	return etcdlock.New(cfg, name, log)
}

// cli carries one invocation's outputs and common flags.
type cli struct {
	stdout, stderr io.Writer
	json           bool
	home           *string // --home, for the commands that take it
	parsed         bool    // the flags parsed: home is the one given
	emitted        bool    // the command printed its output
}

// errorOut is what a command prints on stdout with --json when it fails
// before it printed its output: the error, as stderr's line has it, and
// the home it was given, for a command that takes one.
type errorOut struct {
	Error string `json:"error"`
	Home  string `json:"home,omitempty"`
}

// usageError is a bad command line: exit 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stderr, usage)
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	if args[0] == "--version" || args[0] == "-version" {
		args[0] = "version"
	}
	c := &cli{stdout: stdout, stderr: stderr}
	cmds := map[string]func(context.Context, []string) error{
		"version":  c.version,
		"status":   c.status,
		"servers":  c.servers,
		"doctor":   c.doctor,
		"history":  c.history,
		"rollback": c.rollback,
		"sync":     c.sync,
	}
	cmd, ok := cmds[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "mcpkeep: unknown command %q\n\n%s", args[0], usage)
		c.json = wantsJSON(args[1:])
		c.emitError(fmt.Errorf("unknown command %q", args[0]))
		return exitUsage
	}
	err := cmd(ctx, args[1:])
	var ue *usageError
	code := exitError
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "mcpkeep %s: %v (see mcpkeep %s --help)\n", args[0], err, args[0])
		c.json = c.json || wantsJSON(args[1:]) // a flag before --json may have stopped the parse
		code = exitUsage
	case errors.Is(err, lifecycle.ErrLocked):
		fmt.Fprintf(stderr, "mcpkeep %s: %s\n", args[0], oneLine(err))
		code = exitInUse
	default:
		fmt.Fprintf(stderr, "mcpkeep %s: %s\n", args[0], oneLine(err))
	}
	c.emitError(err)
	return code
}

// emitError prints err as an errorOut on stdout, with --json, unless the
// command printed its output already (status and doctor print what they
// found, and then fail).
func (c *cli) emitError(err error) {
	if !c.json || c.emitted {
		return
	}
	out := errorOut{Error: oneLine(err)}
	if c.home != nil && c.parsed {
		out.Home = *c.home
		if abs, err := filepath.Abs(out.Home); out.Home != "" && !strings.HasPrefix(out.Home, "~") && err == nil {
			out.Home = abs // a ~ is reported as given: the error says no shell expanded it
		}
	}
	_ = c.emit(out, "") // stderr has the error already
}

// wantsJSON reports whether args, a command's, ask for --json, for an
// error that stopped their parse before it.
func wantsJSON(args []string) bool {
	want := false
	for _, a := range args {
		if a == "--" {
			break
		}
		name, value, hasValue := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-"), "=")
		if !strings.HasPrefix(a, "-") || name != "json" {
			continue
		}
		b, err := strconv.ParseBool(value)
		want = !hasValue || (err == nil && b) // the last one counts, as in a parse
	}
	return want
}

// flags returns a FlagSet for a command with the common --json flag.
func (c *cli) flags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("mcpkeep "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // run prints a usage error, as one line
	jsonUsage := "print JSON"
	if name == "status" {
		jsonUsage += "; server.http_sessions and server.http_connections are as of server.health.checked_at, " +
			"the last health check, up to a health interval old (/healthz has them live); server.alive is false " +
			"for the stale state file of a server that is not running, whose last records are under server.stale"
	}
	fs.BoolVar(&c.json, "json", false, jsonUsage)
	fs.Usage = func() {
		for _, cmd := range commands {
			if cmd.name == name {
				synopsis := strings.Join(strings.Fields("mcpkeep "+name+" "+cmd.args+" [--json]"), " ")
				fmt.Fprintf(c.stderr, "usage: %s\n\n%s\n\n", synopsis, cmd.about)
			}
		}
		fs.SetOutput(c.stderr)
		fs.PrintDefaults()
		fmt.Fprintf(c.stderr, "\n%s", exitText)
	}
	return fs
}

// homeFlag defines --home, which an error's JSON names once the flags
// parsed.
func (c *cli) homeFlag(fs *flag.FlagSet) *string {
	c.home = fs.String("home", defaultHome(), "server home directory (env MCPKEEP_HOME)")
	return c.home
}

// parse parses args, allowing flags after positional arguments, and returns
// the positional arguments. Once the flags parsed, an error's JSON names
// the home they give.
func (c *cli) parse(fs *flag.FlagSet, args []string, maxPos int) ([]string, error) {
	usage := fs.Usage
	fs.Usage = func() {} // Parse would print it for any error: only -h gets it
	defer func() { fs.Usage = usage }()
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				usage()
				return nil, err
			}
			return nil, &usageError{err.Error()}
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
	c.parsed = true
	if len(pos) > maxPos {
		return nil, &usageError{fmt.Sprintf("unexpected argument %q", pos[maxPos])}
	}
	return pos, nil
}

func defaultHome() string {
	for _, env := range []string{"MCPKEEP_HOME", "HELIOS_HOME"} {
		if h := os.Getenv(env); h != "" {
			return h
		}
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".helios")
	}
	return ""
}

// errNoHome is the usage error for an empty --home.
var errNoHome = &usageError{"no home: pass --home DIR or set MCPKEEP_HOME"}

// checkHome is lifecycle.CheckNewHome for status, which reports on a home
// installed or not yet (an empty directory, an interrupted install), and
// refuses, as the other commands do, any other path: a missing one, a
// file, a ~ no shell expanded, and a directory that holds other files than
// a home's. It returns the home's absolute path.
func checkHome(home string) (string, error) {
	if home == "" {
		return "", errNoHome
	}
	if err := lifecycle.CheckNewHome(home); err != nil {
		return "", err
	}
	return filepath.Abs(home)
}

// installedHome is lifecycle.CheckHome for the commands that read or
// repair a home, which refuses a path that is no home (a ~ no shell
// expanded, a mistyped --home) instead of scattering lock files and
// directories into it. It returns the home's absolute path.
func installedHome(home string) (string, error) {
	if home == "" {
		return "", errNoHome
	}
	if err := lifecycle.CheckHome(home); err != nil {
		return "", err
	}
	return filepath.Abs(home)
}

// version prints "mcpkeep <version> (<detail>)" to stdout: the version of
// the mcpkeep module it was built from and its commit, or for a build that
// is not a release, where it came from (bootstrap.ToolkitVersion). --json
// gives the parts: name, version, commit and detail.
func (c *cli) version(_ context.Context, args []string) error {
	if _, err := c.parse(c.flags("version"), args, 0); err != nil {
		return err
	}
	i := buildinfo.Read()
	return c.emit(map[string]string{"name": "mcpkeep", "version": i.Version, "commit": i.Commit, "detail": i.Detail},
		"mcpkeep "+bootstrap.ToolkitVersion()+"\n")
}

// emit prints v as JSON with --json, else text: the command's output.
func (c *cli) emit(v any, text string) error {
	c.emitted = true
	if c.json {
		enc := json.NewEncoder(c.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	_, err := io.WriteString(c.stdout, text)
	return err
}

// oneLine flattens an error to one line for the terminal.
func oneLine(err error) string { return flat(err.Error()) }

// flat flattens s to one line, its runs of white space to one space.
func flat(s string) string { return strings.Join(strings.Fields(s), " ") }
