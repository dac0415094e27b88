package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestServersUnreadableRegistry: a registry the user may not read, or in
// a directory it may not search, is an error naming the file and the
// permission problem, never "no live servers": a seed project reported
// every OSError as "not in registry".
func TestServersUnreadableRegistry(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root, to run mcpkeep as nobody (uid 65534): root reads any file whatever its mode")
	}
	// nobody cannot run the binary in TestMain's 0700 directory.
	shared, err := os.MkdirTemp("", "mcpkeep-nobody-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(shared) })
	require.NoError(t, os.Chmod(shared, 0o755))
	bin, err := os.ReadFile(mcpkeepBin)
	require.NoError(t, err)
	exe := filepath.Join(shared, "mcpkeep")
	require.NoError(t, os.WriteFile(exe, bin, 0o755))

	registry := []byte(`{"schema":1,"servers":[]}` + "\n")
	for _, tc := range []struct {
		name      string
		file, dir os.FileMode
	}{
		{"unreadable file", 0o600, 0o755},
		{"unsearchable directory", 0o644, 0o700},
	} {
		for _, m := range modes {
			t.Run(tc.name+"/"+m.name, func(t *testing.T) {
				dir, err := os.MkdirTemp(shared, "registry-")
				require.NoError(t, err)
				path := filepath.Join(dir, "servers.json")
				require.NoError(t, os.WriteFile(path, registry, tc.file))
				require.NoError(t, os.Chmod(path, tc.file))
				require.NoError(t, os.Chmod(dir, tc.dir))

				cmd := exec.CommandContext(t.Context(), exe, append([]string{"servers", "--registry", path}, m.args...)...)
				cmd.Env = append(os.Environ(), "MCPKEEP_HOME=", "HELIOS_HOME=", "MCPKEEP_REGISTRY=")
				cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
				var stdout, stderr bytes.Buffer
				cmd.Stdout, cmd.Stderr = &stdout, &stderr
				err = cmd.Run()
				var exit *exec.ExitError
				require.ErrorAs(t, err, &exit, "stdout: %s", stdout.String())

				assert.Equal(t, exitError, exit.ExitCode(), "stderr: %s", stderr.String())
				failed(t, m.args != nil, result{stdout: stdout.String()}, path) // no list, and not "no live servers"
				line, rest, _ := strings.Cut(stderr.String(), "\n")
				assert.Empty(t, rest, "one line")
				assert.True(t, strings.HasPrefix(line, "mcpkeep servers: "), line)
				assert.Contains(t, line, path, "names the file")
				assert.Contains(t, line, syscall.EACCES.Error(), "says what the problem is")
				assert.Contains(t, line, "run as the user who owns it", "and what to do")
			})
		}
	}
}
