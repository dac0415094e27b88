// Package gitremote gives tests a real git remote: a bare repository made
// by the git CLI, reached as a file:// URL, served over HTTP by git
// http-backend through net/http/cgi on 127.0.0.1, or over ssh by an
// in-process ssh server running git-upload-pack and git-receive-pack
// (ServeSSH). Every server a test
// starts is stopped when the test ends. Without the git CLI a test is
// skipped, except in CI (CI set), where it fails saying what to install.
package gitremote

import (
	"context"
	"crypto/subtle"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/cgi"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Git returns the path of the git CLI, skipping the test without one
// (failing it in CI).
func Git(t testing.TB) string {
	t.Helper()
	git, err := exec.LookPath("git")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("the git CLI is needed to serve and check a git remote, and is not on PATH: install git (Debian's git package)")
		}
		t.Skip("no git on PATH")
	}
	return git
}

// Run runs the git CLI in dir with args and returns its standard output,
// failing the test on an error. It runs with no global or system config
// and a fixed identity, so the user's settings change nothing.
func Run(t testing.TB, dir string, args ...string) string {
	t.Helper()
	out, err := Output(t, dir, args...)
	if err != nil {
		t.Fatalf("git %s in %s: %v\n%s", strings.Join(args, " "), dir, err, out)
	}
	return out
}

// Output is Run that returns the error (and the combined output) instead
// of failing.
func Output(t testing.TB, dir string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(Git(t), args...)
	cmd.Dir = dir
	cmd.Env = Env()
	var out strings.Builder
	cmd.Stdout = &out
	var errOut strings.Builder
	cmd.Stderr = &errOut
	err := cmd.Run()
	if err != nil {
		return out.String() + errOut.String(), err
	}
	return out.String(), nil
}

// Env is the environment the CLI runs with: the process's, without the
// user's git configuration, with a fixed identity.
func Env() []string {
	env := []string{}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GIT_") {
			env = append(env, kv)
		}
	}
	return append(env, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=test", "GIT_AUTHOR_EMAIL=test@localhost",
		"GIT_COMMITTER_NAME=test", "GIT_COMMITTER_EMAIL=test@localhost")
}

// Bare makes an empty bare repository (branch main) in a new temporary
// directory and returns its path; file://<path> is its URL.
func Bare(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "remote.git")
	Run(t, filepath.Dir(dir), "init", "--bare", "--initial-branch=main", dir)
	// http-backend takes pushes only from an authenticated user unless
	// the repository allows them.
	Run(t, dir, "config", "http.receivepack", "true")
	return dir
}

// FileURL returns the file:// URL of a repository directory.
func FileURL(dir string) string { return "file://" + filepath.ToSlash(dir) }

// Options configure an HTTP server.
type Options struct {
	// User and Password, when set, are required as HTTP basic
	// authentication: any other request gets 401.
	User, Password string
}

// Server serves one bare repository over HTTP through git http-backend.
type Server struct {
	t       testing.TB
	dir     string
	opts    Options
	handler http.Handler
	addr    string // host:port, kept across Stop and Start

	mu       sync.Mutex
	srv      *http.Server
	done     chan struct{}
	requests int
}

// Serve starts serving the bare repository dir over HTTP on 127.0.0.1
// (a free port) and stops it when the test ends.
func Serve(t testing.TB, dir string, opts *Options) *Server {
	t.Helper()
	git := Git(t)
	execPath, err := exec.Command(git, "--exec-path").Output()
	if err != nil {
		t.Fatalf("git --exec-path: %v", err)
	}
	backend := filepath.Join(strings.TrimSpace(string(execPath)), "git-http-backend")
	if _, err := os.Stat(backend); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("git http-backend is needed to serve a git remote over HTTP: %v (install git)", err)
		}
		t.Skipf("no git http-backend: %v", err)
	}
	s := &Server{t: t, dir: dir}
	if opts != nil {
		s.opts = *opts
	}
	cgiHandler := &cgi.Handler{
		Path: backend,
		Root: "/git",
		Dir:  filepath.Dir(dir),
		// receive-pack's refusals (a compare-and-swap that lost) are
		// the client's to report.
		Stderr: io.Discard,
		Env:    append(Env(), "GIT_PROJECT_ROOT="+filepath.Dir(dir), "GIT_HTTP_EXPORT_ALL=1"),
	}
	s.handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.requests++
		s.mu.Unlock()
		if s.opts.User != "" || s.opts.Password != "" {
			u, p, ok := r.BasicAuth()
			if !ok || subtle.ConstantTimeCompare([]byte(u), []byte(s.opts.User)) != 1 ||
				subtle.ConstantTimeCompare([]byte(p), []byte(s.opts.Password)) != 1 {
				w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
				http.Error(w, "authentication required", http.StatusUnauthorized)
				return
			}
		}
		cgiHandler.ServeHTTP(w, r)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen on 127.0.0.1: %v", err)
	}
	s.addr = ln.Addr().String()
	s.start(ln)
	t.Cleanup(s.Stop)
	return s
}

func (s *Server) start(ln net.Listener) {
	srv := &http.Server{Handler: s.handler, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	s.mu.Lock()
	s.srv, s.done = srv, done
	s.mu.Unlock()
}

// URL returns the repository's URL, without credentials.
func (s *Server) URL() string {
	return "http://" + s.addr + "/git/" + filepath.Base(s.dir)
}

// URLWithPassword returns the URL with user and password in it.
func (s *Server) URLWithPassword(user, password string) string {
	u, _ := url.Parse(s.URL())
	u.User = url.UserPassword(user, password)
	return u.String()
}

// Requests returns how many HTTP requests the server has had.
func (s *Server) Requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests
}

// Stop stops serving (a connection then fails: the remote is
// unreachable) and waits for the server's goroutine. It may be called
// more than once.
func (s *Server) Stop() {
	s.mu.Lock()
	srv, done := s.srv, s.done
	s.srv = nil
	s.mu.Unlock()
	if srv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		srv.Close()
	}
	<-done
}

// Start serves again on the same address after Stop, retrying for a few
// seconds while the port is not free yet.
func (s *Server) Start() {
	s.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ln, err := net.Listen("tcp", s.addr)
		if err == nil {
			s.start(ln)
			return
		}
		if time.Now().After(deadline) || !errors.Is(err, syscall.EADDRINUSE) {
			s.t.Fatalf("serve the remote again on %s: %v", s.addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
