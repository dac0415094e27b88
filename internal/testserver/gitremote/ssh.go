package gitremote

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// SSHServer serves bare repositories over ssh on 127.0.0.1, as a git
// host does: a client whose key is authorized may run git-upload-pack and
// git-receive-pack on a repository, given by its absolute path, and
// nothing else.
type SSHServer struct {
	t       testing.TB
	ln      net.Listener
	hostKey ssh.PublicKey
	config  *ssh.ServerConfig
	wg      sync.WaitGroup
	mu      sync.Mutex
	conns   map[net.Conn]bool
	closed  bool
}

// NewKey writes a new ed25519 private key, unencrypted in OpenSSH's
// format, to a file in a temporary directory and returns the file, the
// key (for an ssh agent) and its signer.
func NewKey(t testing.TB) (file string, priv ed25519.PrivateKey, signer ssh.Signer) {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	file = filepath.Join(t.TempDir(), "id_ed25519")
	if err := os.WriteFile(file, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	if signer, err = ssh.NewSignerFromKey(priv); err != nil {
		t.Fatal(err)
	}
	return file, priv, signer
}

// ServeSSH starts an ssh server on 127.0.0.1 (a free port) that accepts
// the public key authorized, and stops it when the test ends.
func ServeSSH(t testing.TB, authorized ssh.PublicKey) *SSHServer {
	t.Helper()
	Git(t)
	_, hostPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	host, err := ssh.NewSignerFromKey(hostPriv)
	if err != nil {
		t.Fatal(err)
	}
	want := authorized.Marshal()
	config := &ssh.ServerConfig{
		PublicKeyCallback: func(_ ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
			if string(key.Marshal()) != string(want) {
				return nil, errors.New("key not authorized")
			}
			return nil, nil
		},
	}
	config.AddHostKey(host)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen on 127.0.0.1: %v", err)
	}
	s := &SSHServer{t: t, ln: ln, hostKey: host.PublicKey(), config: config, conns: map[net.Conn]bool{}}
	s.wg.Go(s.accept)
	t.Cleanup(s.Stop)
	return s
}

// URL returns the ssh:// URL of the bare repository dir (an absolute
// path) on this server, for user git.
func (s *SSHServer) URL(dir string) string {
	return "ssh://git@" + s.ln.Addr().String() + filepath.ToSlash(dir)
}

// KnownHosts writes a known_hosts file naming the server's host key and
// returns its path, for SSH_KNOWN_HOSTS.
func (s *SSHServer) KnownHosts(t testing.TB) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "known_hosts")
	line := knownhosts.Line([]string{knownhosts.Normalize(s.ln.Addr().String())}, s.hostKey)
	if err := os.WriteFile(file, []byte(line+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// Stop closes the listener and every connection, and waits for their
// goroutines. It may be called more than once.
func (s *SSHServer) Stop() {
	s.mu.Lock()
	s.closed = true
	s.ln.Close()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

func (s *SSHServer) accept() {
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			c.Close()
			return
		}
		s.conns[c] = true
		s.mu.Unlock()
		s.wg.Go(func() {
			defer func() {
				s.mu.Lock()
				delete(s.conns, c)
				s.mu.Unlock()
				c.Close()
			}()
			s.serve(c)
		})
	}
}

func (s *SSHServer) serve(c net.Conn) {
	conn, chans, reqs, err := ssh.NewServerConn(c, s.config)
	if err != nil {
		return // a refused key, or the server stopping
	}
	defer conn.Close()
	go ssh.DiscardRequests(reqs)
	var wg sync.WaitGroup
	defer wg.Wait()
	for nc := range chans {
		if nc.ChannelType() != "session" {
			nc.Reject(ssh.UnknownChannelType, "only sessions")
			continue
		}
		ch, chReqs, err := nc.Accept()
		if err != nil {
			return
		}
		wg.Go(func() { s.session(ch, chReqs) })
	}
}

// session runs the one git command a session's exec request names, and
// refuses everything else (a shell, a pty, other commands).
func (s *SSHServer) session(ch ssh.Channel, reqs <-chan *ssh.Request) {
	defer ch.Close()
	for req := range reqs {
		if req.Type != "exec" {
			req.Reply(req.Type == "env", nil) // env is ignored
			continue
		}
		var payload struct{ Command string }
		if err := ssh.Unmarshal(req.Payload, &payload); err != nil {
			req.Reply(false, nil)
			return
		}
		name, arg, _ := strings.Cut(payload.Command, " ")
		dir := strings.TrimSuffix(strings.TrimPrefix(arg, "'"), "'")
		if (name != "git-upload-pack" && name != "git-receive-pack") || !filepath.IsAbs(dir) || strings.Contains(dir, "'") {
			req.Reply(false, nil)
			io.WriteString(ch.Stderr(), "only git-upload-pack and git-receive-pack of an absolute path\n")
			return
		}
		req.Reply(true, nil)
		cmd := exec.Command(Git(s.t), strings.TrimPrefix(name, "git-"), dir)
		cmd.Env = Env()
		cmd.Stdout, cmd.Stderr = ch, ch.Stderr()
		stdin, err := cmd.StdinPipe()
		if err == nil {
			err = cmd.Start()
		}
		status := uint32(0)
		if err != nil {
			io.WriteString(ch.Stderr(), err.Error()+"\n")
			status = 127
		} else {
			go func() {
				io.Copy(stdin, ch)
				stdin.Close()
			}()
			if err := cmd.Wait(); err != nil {
				status = 1
				var exit *exec.ExitError
				if errors.As(err, &exit) && exit.ExitCode() > 0 {
					status = uint32(exit.ExitCode())
				}
			}
		}
		ch.CloseWrite()
		ch.SendRequest("exit-status", false, binary.BigEndian.AppendUint32(nil, status))
		return
	}
}
