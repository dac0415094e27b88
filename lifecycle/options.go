package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpkeep/mcpkeep/atomicfile"
	"github.com/mcpkeep/mcpkeep/bootstrap"
	"github.com/mcpkeep/mcpkeep/lifecycle/internal/attach"
	"github.com/mcpkeep/mcpkeep/portmgr"
)

// ErrNoHarness is Run's error on a nil or zero *Harness: one that New did
// not return, or returned with an error that was not checked.
var ErrNoHarness = errors.New("lifecycle: Run on a nil or zero *Harness: use the Harness that New returned with a nil error")

// OptionsError is an Options value that New or Run cannot use.
type OptionsError struct {
	Field   string // the field as the caller wrote it: "Name", "Spec.Schema", "NewServer"
	Problem string // what is wrong and what to set instead
	Err     error  // the cause, if any: a *bootstrap.SpecError, an address's parse error
}

// Error reads "lifecycle: Options.<Field> <Problem>".
func (e *OptionsError) Error() string { return "lifecycle: Options." + e.Field + " " + e.Problem }

// Unwrap returns the cause.
func (e *OptionsError) Unwrap() error { return e.Err }

// check checks opts and fills in the defaults of the fields left zero. It
// does no I/O.
func (opts *Options) check() error {
	bad := func(field, format string, args ...any) error {
		return &OptionsError{Field: field, Problem: fmt.Sprintf(format, args...)}
	}
	switch {
	case strings.TrimSpace(opts.Name) == "":
		return bad("Name", "is empty: give the server's name, as `mcpkeep servers` and the state file show it")
	case opts.Home == "":
		return bad("Home", "is empty: give the home directory (created if missing) as an absolute path, such as filepath.Join(home, \".%s\") with home from os.UserHomeDir()", opts.Name)
	case startsWithTilde(opts.Home):
		return bad("Home", "%q starts with ~, which only a shell expands: build the path with os.UserHomeDir(), such as filepath.Join(home, \".%s\")", opts.Home, opts.Name)
	case strings.ContainsRune(opts.Home, 0):
		return bad("Home", "%q holds a NUL byte, which no path can: give the home directory", opts.Home)
	case !filepath.IsAbs(opts.Home):
		return bad("Home", "%q is relative, so it would depend on the working directory, which an MCP client that launches the server chooses: "+
			"give an absolute path, built with os.UserHomeDir() (such as filepath.Join(home, \".%s\")), or filepath.Abs of a path the user typed", opts.Home, opts.Name)
	case opts.NewServer == nil:
		return bad("NewServer", "is nil: give the function that builds the *mcp.Server, with its tools, from the *Env")
	case opts.NoStdio && opts.HTTP == "":
		return bad("NoStdio", "is set and Options.HTTP is empty: no transport is left; set HTTP (such as 127.0.0.1:0) or leave stdio on")
	}
	if opts.HTTP != "" {
		host, port, err := net.SplitHostPort(opts.HTTP)
		if err != nil {
			return &OptionsError{Field: "HTTP", Problem: fmt.Sprintf("%q is not host:port: give an address such as 127.0.0.1:0 (0 picks a free port)", opts.HTTP), Err: err}
		}
		if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
			return bad("HTTP", "%q: port %q is not a number from 0 to 65535 (0 picks a free one)", opts.HTTP, port)
		}
		if opts.NoToken && !portmgr.IsLoopback(host) {
			return bad("NoToken", "is set but Options.HTTP %q is not loopback: the bearer token cannot be switched off for other machines", opts.HTTP)
		}
	}
	if opts.AdvertiseURL != "" {
		if u, err := url.Parse(opts.AdvertiseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return bad("AdvertiseURL", "%q is not an http or https URL with a host, such as http://host-a.example:8080/mcp", opts.AdvertiseURL)
		}
		if opts.Elector == nil {
			return bad("AdvertiseURL", "is set but Options.Elector is nil: only an elected writer advertises its URL; set Elector or leave AdvertiseURL empty")
		}
	}
	if opts.HTTPMode < HTTPModeBoth || opts.HTTPMode > HTTPModeStateless {
		return bad("HTTPMode", "%d is not one of HTTPModeBoth, HTTPModeSessions, HTTPModeStateless", opts.HTTPMode)
	}
	if err := checkSpec(&opts.Spec); err != nil {
		return err
	}
	if opts.HealthInterval <= 0 {
		opts.HealthInterval = DefaultHealthInterval
	}
	if opts.ShutdownTimeout <= 0 {
		opts.ShutdownTimeout = DefaultShutdownTimeout
	}
	return nil
}

// checkSpec makes the zero Spec a working one (schema 1, no default files)
// and checks the rest as bootstrap.Ensure will, naming the field as the
// caller set it, under Options.Spec.
func checkSpec(spec *bootstrap.Spec) error {
	switch {
	case spec.Schema == 0 && len(spec.Migrations) > 0:
		return &OptionsError{Field: "Spec.Schema", Problem: "is 0 but Spec.Migrations are set: give the schema the last migration reaches"}
	case spec.Schema == 0:
		spec.Schema = 1
	}
	for i, d := range spec.Dirs {
		first, _, _ := strings.Cut(filepath.ToSlash(filepath.Clean(d)), "/")
		if strings.HasPrefix(first, LockFile) || strings.HasPrefix(first, healthProbe) || attach.IsSocketName(first) || atomicfile.IsTemp(first) {
			return &OptionsError{Field: fmt.Sprintf("Spec.Dirs[%d]", i), Problem: fmt.Sprintf("%q is a file of the home's own (%s): give another name", d, first)}
		}
	}
	check := *spec
	check.Home = "home" // filled in by Run
	if err := check.Check(); err != nil {
		if oe := specOptionsError(err); oe != nil {
			return oe
		}
		return &OptionsError{Field: "Spec", Problem: err.Error(), Err: err}
	}
	return nil
}

// specOptionsError returns the *OptionsError naming Options.Spec's field
// for a *bootstrap.SpecError in err, or Options.Home for a
// *bootstrap.OtherServerError, or nil if it holds neither.
func specOptionsError(err error) error {
	var oe *bootstrap.OtherServerError
	if errors.As(err, &oe) {
		return &OptionsError{Field: "Home", Problem: fmt.Sprintf("%s is the home of server %q (its %s says so), not of %q: "+
			"give %q a home of its own (Options.Home)", oe.Home, oe.Stamped, bootstrap.VersionFile, oe.Server, oe.Server), Err: err}
	}
	var se *bootstrap.SpecError
	if !errors.As(err, &se) {
		return nil
	}
	return &OptionsError{Field: "Spec." + se.Field, Problem: se.Problem, Err: err}
}

// checkHomeIsDir refuses a home that is a file, or whose path goes through
// one, before the lock tries to create a directory there.
func checkHomeIsDir(home string) error {
	fi, err := os.Stat(home)
	switch {
	case err == nil && fi.IsDir():
		return nil
	case err == nil:
		return &OptionsError{Field: "Home", Problem: fmt.Sprintf("%s is a file, not a directory: give the path of a directory "+
			"(one that does not exist yet is created), or move the file away", home)}
	case errors.Is(err, syscall.ENOTDIR):
		for dir := filepath.Dir(home); dir != filepath.Dir(dir); dir = filepath.Dir(dir) {
			if fi, err := os.Stat(dir); err == nil && !fi.IsDir() {
				return &OptionsError{Field: "Home", Problem: fmt.Sprintf("%s is inside %s, which is a file, not a directory: "+
					"give the path of a directory, or move the file away", home, dir), Err: err}
			}
		}
	}
	return nil // missing, or unreadable: the lock creates it or says why
}

// createHome creates the home (0700) if it is missing, and refuses, naming
// Options.Home, one this user cannot create: a parent it may not write, a
// read-only file system, a parent that cannot hold directories.
func createHome(home string) error {
	err := atomicfile.MkdirAll(home, 0o700)
	if err == nil || !(errors.Is(err, fs.ErrPermission) || errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.EROFS)) {
		return err // the lock says why, with the disk's remedy
	}
	return &OptionsError{Field: "Home", Problem: fmt.Sprintf("%s cannot be created (%v): give a directory this user can create, "+
		"such as one under os.UserHomeDir(), or create it first with the owner and mode the server runs as", home, err), Err: err}
}

// newServer calls the server's NewServer and turns what a newcomer's can
// do wrong into Run's error naming Options.NewServer: a nil server with no
// error, or a panic (the go-sdk's mcp.AddTool panics on a tool whose
// input type is not a struct), logged with its stack.
func newServer(build func(*Env) (*mcp.Server, error), env *Env, log *slog.Logger) (s *mcp.Server, err error) {
	defer func() {
		if r := recover(); r != nil {
			log.Error("Options.NewServer panicked", "panic", r, "stack", string(debug.Stack()))
			s, err = nil, &OptionsError{Field: "NewServer", Problem: fmt.Sprintf("panicked: %v: fix the function "+
				"(mcp.AddTool panics on a tool whose argument or result type is not a struct); the log has the stack", r)}
		}
	}()
	s, err = build(env)
	switch {
	case err != nil:
		return nil, fmt.Errorf("lifecycle: build server: %w", err)
	case s == nil:
		return nil, &OptionsError{Field: "NewServer", Problem: "returned a nil *mcp.Server and no error: return the server it built, or an error saying why it could not"}
	}
	s.AddReceivingMiddleware(recoverPanics(log), growStack)
	return s, nil
}

// recoverPanics keeps a panic in a tool (a nil map, an index out of
// range) from killing the process and every client of the home with it:
// the call fails, a tool call with a tool error that says so, any other
// request with a JSON-RPC error; the stack goes to the log, and the
// server serves on. A change the tool made through Env.Update before the
// panic is kept; one whose function panicked was not made.
func recoverPanics(log *slog.Logger) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (res mcp.Result, err error) {
			defer func() {
				r := recover()
				if r == nil {
					return
				}
				what := fmt.Sprintf("request %q", method)
				if call, ok := req.(*mcp.CallToolRequest); ok && call.Params != nil {
					what = fmt.Sprintf("tool %q", call.Params.Name)
				}
				log.Error("a handler panicked; the call fails and the server serves on", "call", what, "panic", r, "stack", string(debug.Stack()))
				msg := fmt.Sprintf("%s failed: the server panicked (%v), a bug in the server; its log has the stack", what, r)
				if method == "tools/call" {
					res, err = &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: msg}}}, nil
					return
				}
				res, err = nil, errors.New(msg)
			}()
			return next(ctx, method, req)
		}
	}
}

// checkDefaults refuses, on every start (a fresh install, on a user's
// machine, is the only start that reads them), default files whose root
// cannot be read (an fs.Sub of an embed.FS with a path that is not
// embedded, an os.DirFS of a directory that is not there), and a default
// file that start-up recovery would quarantine as corrupt the moment it
// is installed: one that does not parse by its name, or that validate
// (Options.Validate) refuses.
func checkDefaults(defaults fs.FS, validate func(path string, data []byte) error) error {
	if defaults == nil {
		return nil
	}
	if _, err := fs.Stat(defaults, "."); err != nil {
		return &OptionsError{Field: "Spec.Defaults", Problem: fmt.Sprintf("cannot be read (%v): give an fs.FS of the default files, "+
			"such as an fs.Sub of an embed.FS with the embedded directory's path, or an os.DirFS of a directory that exists", err), Err: err}
	}
	return fs.WalkDir(defaults, ".", func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			return nil
		}
		var data []byte
		if err == nil {
			data, err = fs.ReadFile(defaults, p)
		}
		if err != nil {
			return &OptionsError{Field: "Spec.Defaults", Problem: fmt.Sprintf("cannot be read (%v): give an fs.FS whose files can be read", err), Err: err}
		}
		if want, err := checkConfig(p, data, validate); err != nil {
			what := err.Error()
			if ce := (*atomicfile.CorruptError)(nil); errors.As(err, &ce) {
				what = ce.Problem() // its remedy is for a file on disk
			}
			return &OptionsError{Field: "Spec.Defaults", Problem: fmt.Sprintf("holds %s, which the first start would quarantine as corrupt: %s; "+
				"make it %s", p, what, want), Err: err}
		}
		return nil
	})
}
