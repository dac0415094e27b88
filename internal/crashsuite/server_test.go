package crashsuite_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/internal/failpoint"
	"github.com/mcpkeep/mcpkeep/internal/mcptest"
	"github.com/mcpkeep/mcpkeep/statefile"
)

// server is one helios process a fault or bad-input test talks to over
// stdio. Unlike crashtest.Process it can run as another user.
type server struct {
	cmd    *exec.Cmd
	stdin  *os.File
	rpc    *rpc
	stderr mcptest.Buffer
	done   chan struct{}
	err    error // valid once done is closed
}

// launchOpts are the optional parts of a launch.
type launchOpts struct {
	failpoints string              // MCPKEEP_FAILPOINTS
	cred       *syscall.Credential // run as this user
}

// launch starts bin with args and stops it, if it still runs, when the
// test ends. It does not talk to it.
func launch(t *testing.T, bin string, args []string, o launchOpts) *server {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), bin, args...)
	cmd.Env = append(os.Environ(), failpoint.EnvVar+"="+o.failpoints)
	if o.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: o.cred}
	}
	inR, inW, err := os.Pipe()
	require.NoError(t, err)
	outR, outW, err := os.Pipe()
	require.NoError(t, err)
	s := &server{cmd: cmd, stdin: inW, rpc: newRPC(inW, outR), done: make(chan struct{})}
	// *os.File ends go to the child as they are: Wait never closes the
	// parent's read end under a reader.
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, &s.stderr
	require.NoError(t, cmd.Start())
	inR.Close()
	outW.Close()
	go func() {
		s.err = cmd.Wait()
		close(s.done)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-s.done
		inW.Close()
		outR.Close()
	})
	return s
}

// serve launches bin and completes the MCP handshake. With --home among
// args, it then waits until the state file names the server ready, or the
// server exits: a server answers before it writes its start-up files.
func serve(t *testing.T, bin string, args []string, o launchOpts) *server {
	t.Helper()
	s := launch(t, bin, args, o)
	require.NoError(t, s.rpc.initialize(), "stderr:\n%s", s.stderr.String())
	if i := slices.Index(args, "--home"); i >= 0 && i+1 < len(args) {
		path := filepath.Join(args[i+1], statefile.FileName)
		deadline := time.Now().Add(time.Minute)
		for {
			if st, err := statefile.Read(path); err == nil && st.PID == s.cmd.Process.Pid && st.Status == statefile.StatusReady {
				break
			}
			select {
			case <-s.done:
				return s
			default:
			}
			require.False(t, time.Now().After(deadline), "no ready state file after a minute; stderr:\n%s", s.stderr.String())
			time.Sleep(time.Millisecond)
		}
	}
	return s
}

// logged asserts that the server's stderr holds want. The child writes a
// line before it answers, but the line reaches the buffer through exec's
// copying goroutine, so it is polled for until the server exits or a
// minute passes.
func (s *server) logged(t *testing.T, want string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(s.stderr.String(), want) && time.Now().Before(deadline) {
		select {
		case <-s.done:
			deadline = time.Now() // Wait has copied all of it
		case <-time.After(time.Millisecond):
		}
	}
	assert.Contains(t, s.stderr.String(), want)
}

// call calls a tool; the server must answer.
func (s *server) call(t *testing.T, tool string, args any) *toolResult {
	t.Helper()
	r, err := s.rpc.call(tool, args)
	require.NoError(t, err, "stderr:\n%s", s.stderr.String())
	return r
}

// update calls update_preference.
func (s *server) update(t *testing.T, persona, key, value string) *toolResult {
	t.Helper()
	return s.call(t, "update_preference", update{Persona: persona, Key: key, Value: value})
}

// commit returns the commit an update_preference result names.
func commitOf(t *testing.T, r *toolResult) string {
	t.Helper()
	require.False(t, r.IsError, r.Text())
	var out struct {
		Commit string `json:"commit"`
	}
	require.NoError(t, json.Unmarshal(r.Structured, &out))
	require.NotEmpty(t, out.Commit)
	return out.Commit
}

// wait waits for the process to exit and returns its exit status.
func (s *server) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-s.done:
	case <-t.Context().Done():
		t.Fatal("the server did not exit before the test's deadline")
	}
	return s.cmd.ProcessState.ExitCode()
}

// stop closes stdin and requires a clean exit.
func (s *server) stop(t *testing.T) {
	t.Helper()
	s.stdin.Close()
	require.NoError(t, s.rpc.drain())
	require.Equal(t, 0, s.wait(t), "exit status; stderr:\n%s", s.stderr.String())
}

// running reports whether the process has not exited.
func (s *server) running() bool {
	select {
	case <-s.done:
		return false
	default:
		return true
	}
}

// heliosArgs returns the arguments that run helios on home with a
// registry in the test's temporary directory.
func heliosArgs(t *testing.T, home string) []string {
	return []string{"--home", home, "--registry", filepath.Join(t.TempDir(), "servers.json")}
}
