//go:build unix

// Package etcdtest starts a real etcd server for tests: the etcd binary of
// Debian's etcd-server package (or $MCPKEEP_ETCD), alone in a cluster of
// one, on 127.0.0.1 with free ports and a temporary data directory. The
// test's cleanup stops it. Stop and Restart take it down and bring it back
// on the same ports and data, for tests of an etcd that goes away.
//
// Where it cannot start etcd, Start fails the test when CI is set (CI=true)
// and skips it, saying why, elsewhere when the binary is missing; a binary
// that is there but does not start fails the test everywhere.
//
// It does not make a cluster of several members, and it does not start or
// stop the system's etcd service: the server it starts is the test's own.
package etcdtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Env names the environment variable that gives the etcd binary's path;
// without it Start looks for etcd on PATH, then in /usr/bin.
const Env = "MCPKEEP_ETCD"

// startTimeout bounds how long etcd may take to answer /health.
const startTimeout = 30 * time.Second

// Options change how the server starts. The zero value is a plain-HTTP
// server.
type Options struct {
	// TLS serves clients over HTTPS with a certificate of a fresh test CA,
	// and requires a client certificate of that CA (CertFile, KeyFile and
	// CAFile give the client's).
	TLS bool
}

// Server is one running etcd.
type Server struct {
	// URL is the client URL, http://127.0.0.1:PORT (https with TLS).
	URL string
	// CertFile, KeyFile and CAFile are the client's certificate, its key
	// and the CA that signed the server's, with Options.TLS; "" without.
	CertFile, KeyFile, CAFile string

	t       testing.TB
	bin     string
	dir     string
	args    []string
	healthz string
	client  *http.Client

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
	log  *bytes.Buffer // etcd's output, shown when the test fails
}

// Binary returns the path of the etcd binary, or an error saying how to
// install it.
func Binary() (string, error) {
	if p := os.Getenv(Env); p != "" {
		return p, nil
	}
	if p, err := exec.LookPath("etcd"); err == nil {
		return p, nil
	}
	if _, err := os.Stat("/usr/bin/etcd"); err == nil {
		return "/usr/bin/etcd", nil
	}
	return "", errors.New("etcdtest: no etcd binary: install Debian's etcd-server " +
		"(apt-get -o DPkg::Lock::Timeout=600 install -y etcd-server; .ci/run does), or set " + Env + " to one")
}

// Start starts etcd and returns once it answers /health. The test's
// cleanup stops it and removes its data.
func Start(t testing.TB, opts *Options) *Server {
	t.Helper()
	if opts == nil {
		opts = &Options{}
	}
	bin, err := Binary()
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%v (tests of the etcd backend must run in CI)", err)
		}
		t.Skipf("%v; skipping", err)
	}
	dir := t.TempDir()
	s := &Server{t: t, bin: bin, dir: dir, client: &http.Client{Timeout: 2 * time.Second}}
	scheme := "http"
	if opts.TLS {
		scheme = "https"
		tlsFiles, err := writeCerts(filepath.Join(dir, "tls"))
		if err != nil {
			t.Fatalf("etcdtest: make test certificates: %v", err)
		}
		s.CertFile, s.KeyFile, s.CAFile = tlsFiles.clientCert, tlsFiles.clientKey, tlsFiles.ca
		s.client.Transport = &http.Transport{TLSClientConfig: tlsFiles.clientConfig}
		s.args = append(s.args, "--cert-file", tlsFiles.serverCert, "--key-file", tlsFiles.serverKey,
			"--trusted-ca-file", tlsFiles.ca, "--client-cert-auth")
	}
	clientPort, peerPort, err := freePorts()
	if err != nil {
		t.Fatalf("etcdtest: %v", err)
	}
	s.URL = fmt.Sprintf("%s://127.0.0.1:%d", scheme, clientPort)
	peer := fmt.Sprintf("http://127.0.0.1:%d", peerPort)
	s.healthz = s.URL + "/health"
	s.args = append(s.args,
		"--name", "test",
		"--data-dir", filepath.Join(dir, "data"),
		"--listen-client-urls", s.URL, "--advertise-client-urls", s.URL,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", "test="+peer, "--initial-cluster-state", "new",
		// Short Raft timings let leases be as short as one second (etcd
		// raises a shorter TTL to 1.5 election timeouts).
		"--heartbeat-interval", "20", "--election-timeout", "200",
		"--logger", "zap", "--log-level", "warn",
	)
	t.Cleanup(func() {
		s.Stop()
		if t.Failed() {
			s.mu.Lock()
			t.Logf("etcd's output:\n%s", tail(s.log.String(), 4000))
			s.mu.Unlock()
		}
	})
	if err := s.start(); err != nil {
		t.Fatalf("etcdtest: %v", err)
	}
	return s
}

// start runs etcd and waits for it to answer /health.
func (s *Server) start() error {
	s.mu.Lock()
	if s.cmd != nil {
		s.mu.Unlock()
		return errors.New("etcd is already running")
	}
	if s.log == nil {
		s.log = new(bytes.Buffer)
	}
	cmd := exec.Command(s.bin, s.args...)
	cmd.Stdout, cmd.Stderr = lockedWriter{&s.mu, s.log}, lockedWriter{&s.mu, s.log}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		s.mu.Unlock()
		return fmt.Errorf("start %s: %w", s.bin, err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	s.cmd, s.done = cmd, done
	s.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	for {
		if s.healthy(ctx) {
			return nil
		}
		select {
		case <-done:
			s.mu.Lock()
			out := tail(s.log.String(), 2000)
			s.cmd = nil
			s.mu.Unlock()
			return fmt.Errorf("%s exited before it served (%v):\n%s", s.bin, cmd.ProcessState, out)
		case <-ctx.Done():
			s.Stop()
			return fmt.Errorf("%s did not answer %s within %v", s.bin, s.healthz, startTimeout)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// healthy reports whether etcd answers /health with health true.
func (s *Server) healthy(ctx context.Context) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.healthz, nil)
	if err != nil {
		return false
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	buf.ReadFrom(resp.Body)
	return resp.StatusCode == http.StatusOK && strings.Contains(buf.String(), `"health":"true"`)
}

// Stop stops etcd (SIGTERM, then SIGKILL after 10 seconds) and waits for
// it to exit. Its data stays, for Restart. Stopping a stopped server does
// nothing.
func (s *Server) Stop() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
}

// Restart starts a stopped server again on the same ports and data. It
// fails the test if etcd does not come back.
func (s *Server) Restart() {
	s.t.Helper()
	if err := s.start(); err != nil {
		s.t.Fatalf("etcdtest: restart: %v", err)
	}
}

// Running reports whether the server's process is running.
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd != nil
}

// freePorts returns two ports no listener holds now. Both are held until
// both are chosen, so they differ.
func freePorts() (int, int, error) {
	var ports [2]int
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	for i := range ports {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, 0, fmt.Errorf("find a free port: %w", err)
		}
		lns = append(lns, ln)
		ports[i] = ln.Addr().(*net.TCPAddr).Port
	}
	return ports[0], ports[1], nil
}

// tail is the last n bytes of s.
func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// lockedWriter writes to a buffer under the server's lock.
type lockedWriter struct {
	mu  *sync.Mutex
	buf *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}
