package lifecycle_test

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/internal/mcptest"
	"github.com/mcpkeep/mcpkeep/lifecycle"
	"github.com/mcpkeep/mcpkeep/statefile"
)

// mainProc is a mainchild process, a server whose main is lifecycle.Main.
type mainProc struct {
	cmd    *exec.Cmd
	home   string
	stdin  io.WriteCloser
	stderr *mcptest.Buffer
	done   chan struct{}
}

// startMain starts mainchild on home with args, through the program
// wrap names ("" for none, "nohup" to start it with SIGHUP ignored).
func startMain(t *testing.T, wrap, home string, args ...string) *mainProc {
	t.Helper()
	args = append([]string{"-home", home}, args...)
	cmd := exec.Command(mainChild, args...)
	if wrap != "" {
		cmd = exec.Command(wrap, append([]string{mainChild}, args...)...)
	}
	c := &mainProc{cmd: cmd, home: home, stderr: new(mcptest.Buffer), done: make(chan struct{})}
	var err error
	c.stdin, err = cmd.StdinPipe()
	require.NoError(t, err)
	cmd.Stdout, cmd.Stderr = io.Discard, c.stderr
	require.NoError(t, cmd.Start())
	go func() { cmd.Wait(); close(c.done) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-c.done
	})
	return c
}

// exit waits for the process to exit and returns its status.
func (c *mainProc) exit(t *testing.T) int {
	t.Helper()
	select {
	case <-c.done:
	case <-time.After(hangAfter):
		t.Fatalf("mainchild did not exit within %v; stderr:\n%s", hangAfter, c.stderr)
	}
	return c.cmd.ProcessState.ExitCode()
}

// ready waits for the state file to say ready.
func (c *mainProc) ready(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(hangAfter)
	for {
		s, err := statefile.Read(filepath.Join(c.home, statefile.FileName))
		if err == nil && s.Status == statefile.StatusReady {
			return
		}
		select {
		case <-c.done:
			t.Fatalf("mainchild exited before it was ready; stderr:\n%s", c.stderr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("mainchild not ready after %v; stderr:\n%s", hangAfter, c.stderr)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestMainExitStatus: Main exits 0 after a clean stop, 1 when Run fails,
// 2 for Options it refuses, 3 on a home in use it cannot attach to, and
// says why on stderr, prefixed with the server's name.
func TestMainExitStatus(t *testing.T) {
	t.Run("clean stop", func(t *testing.T) {
		c := startMain(t, "", filepath.Join(t.TempDir(), "home"))
		c.ready(t)
		require.NoError(t, c.stdin.Close())
		assert.Equal(t, lifecycle.ExitOK, c.exit(t), c.stderr.String())
	})
	for _, tc := range []struct {
		name   string
		args   []string
		status int
		says   string
	}{
		{"NewServer fails", []string{"-server", "fail"}, lifecycle.ExitError, "mainchild: lifecycle: build server: mainchild: NewServer fails"},
		{"NewServer returns nil", []string{"-server", "nil"}, lifecycle.ExitOptions, "mainchild: lifecycle: Options.NewServer returned a nil *mcp.Server"},
		{"no name", []string{"-name", ""}, lifecycle.ExitOptions, "lifecycle: Options.Name is empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := startMain(t, "", filepath.Join(t.TempDir(), "home"), tc.args...)
			assert.Equal(t, tc.status, c.exit(t), c.stderr.String())
			assert.Contains(t, c.stderr.String(), tc.says)
		})
	}
	t.Run("home in use", func(t *testing.T) {
		home := filepath.Join(t.TempDir(), "home")
		first := startMain(t, "", home)
		first.ready(t)
		second := startMain(t, "", home, "-exclusive")
		assert.Equal(t, lifecycle.ExitInUse, second.exit(t), second.stderr.String())
		assert.Contains(t, second.stderr.String(), "mainchild: home "+home+" is in use by pid")
	})
}

var unignoreOnce sync.Once

// unignoreSIGHUP makes the children this test process starts from now on
// get SIGHUP's default action when the tests run under nohup, whose
// ignored SIGHUP they would otherwise inherit, and serve on (rightly: the
// nohup case of TestMainSIGHUP): a signal the process handles is reset to
// its default across exec. For the rest of the run, a SIGHUP to the test
// process is dropped, as nohup had it.
func unignoreSIGHUP() {
	unignoreOnce.Do(func() {
		if signal.Ignored(syscall.SIGHUP) {
			signal.Notify(make(chan os.Signal, 1), syscall.SIGHUP)
		}
	})
}

// TestMainSIGHUP: SIGHUP stops a server on Main cleanly, as SIGTERM does
// (the npm launcher passes its own SIGHUP on; a closed terminal sends
// one), unless the server was started with SIGHUP ignored, as nohup does:
// then it serves on, until its stdin ends.
func TestMainSIGHUP(t *testing.T) {
	t.Run("stops", func(t *testing.T) {
		unignoreSIGHUP()
		c := startMain(t, "", filepath.Join(t.TempDir(), "home"))
		c.ready(t)
		require.NoError(t, c.cmd.Process.Signal(syscall.SIGHUP))
		assert.Equal(t, lifecycle.ExitOK, c.exit(t), c.stderr.String())
		assert.Contains(t, c.stderr.String(), "signal or context", "stopped by the signal")
		assert.NoFileExists(t, filepath.Join(c.home, statefile.FileName), "a clean stop")
	})
	t.Run("nohup", func(t *testing.T) {
		if _, err := exec.LookPath("nohup"); err != nil {
			t.Skip("no nohup on this machine")
		}
		c := startMain(t, "nohup", filepath.Join(t.TempDir(), "home"))
		c.ready(t)
		// An ignored signal is discarded when it is sent: by the time
		// Signal returns, it can no longer stop the server.
		require.NoError(t, c.cmd.Process.Signal(syscall.SIGHUP))
		require.NoError(t, c.stdin.Close())
		assert.Equal(t, lifecycle.ExitOK, c.exit(t), c.stderr.String())
		assert.Contains(t, c.stderr.String(), "stdin closed", "stopped by its stdin's end, not the signal")
		assert.NotContains(t, c.stderr.String(), "signal or context")
	})
}

// TestMainStderrClosed: a server on Main whose client stops reading its
// stderr, then closes its stdin, stops cleanly: the log lines of its
// shutdown fail instead of killing it with SIGPIPE.
func TestMainStderrClosed(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	cmd := exec.Command(mainChild, "-home", home)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { cmd.Process.Kill() })
	first := make([]byte, 1)
	_, err = stderr.Read(first) // it has started logging
	require.NoError(t, err)
	require.NoError(t, stderr.Close())
	require.NoError(t, stdin.Close())
	assert.NoError(t, cmd.Wait(), "exit status 0, not killed by SIGPIPE")
	assert.NoFileExists(t, filepath.Join(home, statefile.FileName), "a clean stop")
}

// TestMainStdoutIsTheTransports: what a tool of a server on Main prints to
// stdout, itself or through a program it runs, goes to stderr, and the
// client's stream holds only messages: the calls around it are answered.
func TestMainStdoutIsTheTransports(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	cmd := exec.Command(mainChild, "-home", home)
	stderr := new(mcptest.Buffer)
	cmd.Stderr = stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, nil)
	cs, err := client.Connect(t.Context(), &mcp.CommandTransport{Command: cmd}, nil)
	require.NoError(t, err)
	for range 2 {
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "print"})
		require.NoError(t, err, "stderr:\n%s", stderr)
		assert.False(t, res.IsError, "%s", mcptest.Text(res))
	}
	require.NoError(t, cs.Close())
	assert.Contains(t, stderr.String(), "mainchild: print: stray output from a tool\n")
	assert.Contains(t, stderr.String(), "mainchild: print: output of a program a tool runs\n")
}

// TestMainToolIgnoresContext: a tool that blocks for ever, ignoring its
// context, does not keep a server on Main from stopping, neither when its
// stdin ends nor on SIGTERM: ShutdownTimeout (and a short grace) after,
// it logs the call by its tool's name and exits, releasing the home, and
// the next start on the home serves as after a crash. So does one that
// blocks inside an Update's function, holding the turn that the
// shutdown's commit waits for (it waited for ever, found by a new-user
// trial).
func TestMainToolIgnoresContext(t *testing.T) {
	for _, tc := range []struct{ tool, stop string }{
		{"block", "stdin"}, {"block", "SIGTERM"},
		// Inside an Update's function, holding the transactions' turn,
		// which the shutdown's commit waits for (bounded).
		{"block_update", "stdin"}, {"block_update", "SIGTERM"},
	} {
		tool, stop := tc.tool, tc.stop
		t.Run(tool+"/"+stop, func(t *testing.T) {
			home := filepath.Join(t.TempDir(), "home")
			c := startMain(t, "", home, "-block", "-shutdown", "200ms")
			c.ready(t)
			for _, msg := range []string{
				`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"test","version":"v0"}}}`,
				`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
				`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"` + tool + `","arguments":{}}}`,
			} {
				_, err := io.WriteString(c.stdin, msg+"\n")
				require.NoError(t, err)
			}
			deadline := time.Now().Add(hangAfter)
			for !bytes.Contains([]byte(c.stderr.String()), []byte("mainchild: "+tool+": called")) {
				require.True(t, time.Now().Before(deadline), "the tool was not called; stderr:\n%s", c.stderr)
				time.Sleep(5 * time.Millisecond)
			}
			if stop == "stdin" {
				require.NoError(t, c.stdin.Close())
			} else {
				require.NoError(t, c.cmd.Process.Signal(syscall.SIGTERM))
			}
			assert.Equal(t, lifecycle.ExitOK, c.exit(t), c.stderr.String())
			assert.Contains(t, c.stderr.String(), "tool "+tool+" still running after ShutdownTimeout; exiting without it")
			assert.NoFileExists(t, filepath.Join(home, statefile.FileName), "the state file is removed")

			next := startMain(t, "", home)
			next.ready(t)
			require.NoError(t, next.stdin.Close())
			assert.Equal(t, lifecycle.ExitOK, next.exit(t), next.stderr.String())
		})
	}
}
