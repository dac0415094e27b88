package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/internal/mcptest"
	"github.com/mcpkeep/mcpkeep/statefile"
)

// serverInfoHealth calls server_info over HTTP and returns the health it
// reports.
func serverInfoHealth(t *testing.T, st *statefile.State) *statefile.Health {
	t.Helper()
	info := mcptest.Call[struct {
		State statefile.State `json:"state"`
	}](t, connectHTTP(t, st), "server_info", nil)
	return info.State.Health
}

// TestHealthAtStart: the first health check runs before the server says it
// is ready, so the state file and server_info carry its result from the
// start, not after the 30 s interval.
func TestHealthAtStart(t *testing.T) {
	_, st := startHTTP(t, filepath.Join(t.TempDir(), "servers.json"))
	require.NotNil(t, st.Health, "the ready state file holds a health check")
	assert.True(t, st.Health.OK, "%v", st.Health.Problems)
	assert.False(t, st.Health.CheckedAt.IsZero())
	health := serverInfoHealth(t, st)
	require.NotNil(t, health, "server_info reports health")
	assert.True(t, health.OK)
}

// nobody is the unprivileged user a test runs helios as when it runs as
// root, which file modes do not stop.
var nobody = syscall.Credential{Uid: 65534, Gid: 65534}

// TestHealthAtStartUnwritableConfig: a config/ the server cannot write
// (tools could not save a change) is in the first health check, so the
// state file and server_info say so as soon as the server is ready.
func TestHealthAtStartUnwritableConfig(t *testing.T) {
	dir := t.TempDir()
	bin, cred := heliosBin, (*syscall.Credential)(nil)
	if os.Geteuid() == 0 {
		// Root ignores file modes: run helios as nobody, on a home nobody
		// owns, with a config/ that only root may write.
		require.NoError(t, os.Chmod(filepath.Dir(dir), 0o755))
		require.NoError(t, os.Chown(dir, int(nobody.Uid), int(nobody.Gid)))
		bin, cred = filepath.Join(dir, "helios"), &nobody
		data, err := os.ReadFile(heliosBin)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(bin, data, 0o755))
	}
	command := func(args ...string) *exec.Cmd {
		cmd := exec.Command(bin, args...)
		if cred != nil {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		}
		return cmd
	}
	home := filepath.Join(dir, "home")
	install := command("--home", home, "--registry", "") // stdin at EOF: install, then stop
	out, err := install.CombinedOutput()
	require.NoError(t, err, "install the home: %s", out)

	config := filepath.Join(home, "config")
	if cred != nil {
		require.NoError(t, os.Chown(config, 0, 0))
		require.NoError(t, os.Chmod(config, 0o755))
	} else {
		require.NoError(t, os.Chmod(config, 0o555))
		t.Cleanup(func() { os.Chmod(config, 0o700) })
	}

	cmd := command("--home", home, "--registry", "", "--http", "127.0.0.1:0")
	stdin, err := cmd.StdinPipe() // held open: stdio stays up
	require.NoError(t, err)
	var stderr mcptest.Buffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		stdin.Close()
		cmd.Process.Kill()
		<-exited
	})
	var st *statefile.State
	deadline := time.Now().Add(hangAfter)
	for {
		st, err = statefile.Read(filepath.Join(home, statefile.FileName))
		if err == nil && st.PID == cmd.Process.Pid && st.Status == statefile.StatusReady {
			break
		}
		select {
		case <-exited:
			t.Fatalf("helios exited before it was ready; stderr:\n%s", stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("helios not ready after %v; stderr:\n%s", hangAfter, stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}

	require.NotNil(t, st.Health, "the ready state file holds a health check")
	assert.False(t, st.Health.OK)
	problems := strings.Join(st.Health.Problems, "\n")
	assert.Contains(t, problems, config+" is not writable")
	assert.Contains(t, problems, "permission denied: run the server as the owner of "+home)
	health := serverInfoHealth(t, st)
	require.NotNil(t, health, "server_info reports health")
	assert.False(t, health.OK)
	assert.Equal(t, st.Health.Problems, health.Problems)
	assert.Contains(t, stderr.String(), "health check failed", "and it is logged")
}
