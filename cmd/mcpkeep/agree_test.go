package main

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/internal/mcptest"
	"github.com/mcpkeep/mcpkeep/lifecycle"
	"github.com/mcpkeep/mcpkeep/recovery"
	"github.com/mcpkeep/mcpkeep/statefile"
)

// TestStatusAgreesWithDoctor: damage doctor finds in a stopped home is a
// problem for status too, exit 1, listed as doctor's own line for it: a
// corrupt config file, a stamp that is missing, garbage or unreadable
// beside the config repository (lost, not an interrupted install), a
// repository that opening would repair, and a PID lock file that cannot
// be read. Doctor never calls such a home clean.
func TestStatusAgreesWithDoctor(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, home string)
		kind   string // of the finding status lists too
		nobody bool   // run as another user than root, which reads any file
	}{
		{"corrupt config file", func(t *testing.T, home string) {
			write(t, filepath.Join(home, "config", "personas", "default.yaml"), "id: 1\ntitle: \"buy mi")
		}, recovery.KindCorruptConfig, false},
		{"garbage stamp", func(t *testing.T, home string) {
			write(t, filepath.Join(home, ".version"), "garbage\n")
		}, kindLostStamp, false},
		{"missing stamp", func(t *testing.T, home string) {
			require.NoError(t, os.Remove(filepath.Join(home, ".version")))
		}, kindLostStamp, false},
		{"unreadable stamp", func(t *testing.T, home string) {
			require.NoError(t, os.Chmod(filepath.Join(home, ".version"), 0))
		}, recovery.KindUnreadableFile, true},
		{"unreadable lock file", func(t *testing.T, home string) {
			write(t, filepath.Join(home, lifecycle.LockFile), "1\n")
			require.NoError(t, os.Chmod(filepath.Join(home, lifecycle.LockFile), 0))
		}, recovery.KindUnreadableFile, true},
		{"missing .git/HEAD", func(t *testing.T, home string) {
			require.NoError(t, os.Remove(filepath.Join(home, "config", ".git", "HEAD")))
		}, recovery.KindGitRepair, false},
	} {
		says := map[string]string{"missing .git/HEAD": "would write the missing .git/HEAD"}[tc.name]
		t.Run(tc.name, func(t *testing.T) {
			home := installed(t)
			run := func(args ...string) result { return mcpkeep(t, args...) }
			if tc.nobody {
				run = asNobody(t, home)
			}
			tc.damage(t, home)

			r := run("doctor", "--home", home)
			assert.Equal(t, exitError, r.code, r.stdout)
			require.NotContains(t, r.stdout, ": clean")
			var line string // doctor's line for the finding
			for l := range strings.Lines(r.stdout) {
				if strings.HasPrefix(l, tc.kind+" ") {
					line = strings.TrimSuffix(l, "\n")
				}
			}
			require.NotEmpty(t, line, "no %s finding:\n%s", tc.kind, r.stdout)
			assert.Contains(t, line, says)

			for _, m := range modes {
				r := run(append([]string{"status", "--home", home}, m.args...)...)
				assert.Equal(t, exitError, r.code, "%s%s", r.stdout, r.stderr)
				problems := statusProblems(t, m.args != nil, r)
				has := slices.ContainsFunc(problems, func(p string) bool { return strings.HasPrefix(p, line) })
				assert.True(t, has, "status's problems %q lack doctor's %q", problems, line)
			}
		})
	}
}

// write writes data to path.
func write(t *testing.T, path, data string) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, []byte(data), 0o600))
}

// nobody is the user asNobody runs mcpkeep as.
const nobody = 65534

// asNobody returns a function that runs mcpkeep as the unprivileged user
// nobody, after giving home to it, when the test runs as root, which
// reads any file whatever its mode; as another user, it runs mcpkeep as
// that user.
func asNobody(t *testing.T, home string) func(args ...string) result {
	t.Helper()
	if os.Getuid() != 0 {
		return func(args ...string) result { return mcpkeep(t, args...) }
	}
	for dir := filepath.Dir(home); dir != os.TempDir() && dir != "/"; dir = filepath.Dir(dir) {
		require.NoError(t, os.Chmod(dir, 0o711)) // nobody reaches the home and the binary
	}
	require.NoError(t, filepath.WalkDir(home, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, nobody, nobody)
	}))
	bin := filepath.Join(filepath.Dir(home), "mcpkeep")
	b, err := os.ReadFile(mcpkeepBin)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(bin, b, 0o755))
	return func(args ...string) result {
		t.Helper()
		cmd := exec.CommandContext(t.Context(), bin, args...)
		cmd.Env = append(os.Environ(), "MCPKEEP_HOME=", "HELIOS_HOME=", "MCPKEEP_REGISTRY=")
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody, Groups: []uint32{}}}
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		if errors.Is(err, syscall.EPERM) {
			t.Skipf("root cannot switch to uid %d here: %v", nobody, err)
		}
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			require.NoError(t, err)
		}
		return result{stdout.String(), stderr.String(), cmd.ProcessState.ExitCode()}
	}
}

// TestReusedPID: a PID lock file and a state file naming a pid that a
// process other than the dead writer runs under now (the state file's
// start time tells), as after a reboot: status calls the lock stale, and
// doctor, without --fix, reports the lock and the dead writer's socket
// as stale too, as status would.
func TestReusedPID(t *testing.T) {
	home := installed(t)
	self := os.Getpid() // runs: the pid reused
	require.NoError(t, os.WriteFile(filepath.Join(home, lifecycle.LockFile), []byte(strconv.Itoa(self)+"\n"), 0o600))
	st, err := statefile.New("helios", home)
	require.NoError(t, err)
	st.StartTime++ // the dead writer started at another time
	st.Socket = filepath.Join(home, "mcp.sock")
	require.NoError(t, statefile.Write(filepath.Join(home, statefile.FileName), &st))
	mcptest.DeadSocket(t, st.Socket, false)

	got := decode[statusOut](t, mcpkeep(t, "status", "--home", home, "--json"))
	assert.Equal(t, &lockOut{PID: self}, got.Lock, "stale")
	r := mcpkeep(t, "doctor", "--home", home, "--json")
	assert.Equal(t, exitError, r.code, r.stdout)
	assert.Equal(t, []string{kindStaleLock, kindStaleSocket, recovery.KindStaleState}, findings(t, true, r))
}
