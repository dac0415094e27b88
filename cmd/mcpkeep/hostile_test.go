package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/recovery"
)

// mcpkeepWithin is mcpkeep that fails t if the command has not exited
// after a minute: a command that waits on a fifo's writer is the bug.
func mcpkeepWithin(t *testing.T, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, mcpkeepBin, args...)
	cmd.Env = append(os.Environ(), "MCPKEEP_HOME=", "HELIOS_HOME=", "MCPKEEP_REGISTRY="+filepath.Join(t.TempDir(), "servers.json"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	_ = cmd.Run()
	require.NoError(t, ctx.Err(), "mcpkeep %v still ran after a minute", args)
	return result{stdout.String(), stderr.String(), cmd.ProcessState.ExitCode()}
}

// gitCLI runs the git CLI in dir.
func gitCLI(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@t"}, args...)...).CombinedOutput()
	require.NoError(t, err, "git %v: %s", args, out)
	return string(out)
}

// TestStatusAndDoctorOnPipes: a fifo as the PID lock file, as state.json
// or as a config file blocks neither status nor doctor; doctor reports
// them, and --fix moves each to backups/.
func TestStatusAndDoctorOnPipes(t *testing.T) {
	home := installed(t)
	for _, p := range []string{".lock", "state.json", "config/personas/pipe.yaml"} {
		require.NoError(t, syscall.Mkfifo(filepath.Join(home, filepath.FromSlash(p)), 0o600))
	}
	r := mcpkeepWithin(t, "status", "--home", home)
	assert.Equal(t, exitError, r.code, "problems listed: %s", r.stdout)
	lockLine := "stale-lock .lock: would be reclaimed (.lock is a named pipe (fifo), not a PID file"
	assert.Contains(t, r.stdout, "problem:   "+lockLine)
	assert.Contains(t, r.stdout, "problem:   "+recovery.KindRefusedFile+" config/personas/pipe.yaml: would be quarantined to backups/ (a named pipe (fifo)")

	r = mcpkeepWithin(t, "doctor", "--home", home)
	assert.Equal(t, exitError, r.code)
	assert.Contains(t, r.stdout, recovery.KindRefusedFile+" config/personas/pipe.yaml: would be quarantined")
	assert.Contains(t, r.stdout, "\n"+lockLine, "doctor reports the lock status lists")
	r = mcpkeepWithin(t, "doctor", "--home", home, "--fix")
	assert.Contains(t, r.stdout, "stale-lock .lock: reclaimed")
	assert.Contains(t, r.stdout, ".lock was a named pipe (fifo), not a PID file; moved to "+filepath.Join(home, "backups"))
	assert.Contains(t, r.stdout, recovery.KindRefusedFile+" config/personas/pipe.yaml: quarantined to backups/refused-")
	_, err := os.Lstat(filepath.Join(home, "config", "personas", "pipe.yaml"))
	assert.ErrorIs(t, err, os.ErrNotExist)
}

// TestRollbackToALinkInHistory: a history that already holds a link, made
// with the git CLI: `mcpkeep rollback` to it is refused with an error that
// names the entry and the revision, and the tree and HEAD are unchanged.
func TestRollbackToALinkInHistory(t *testing.T) {
	home := installed(t)
	config := filepath.Join(home, "config")
	outside := filepath.Join(t.TempDir(), "id_ed25519")
	require.NoError(t, os.WriteFile(outside, []byte("PRIVATE KEY\n"), 0o600))
	link := filepath.Join(config, "personas", "evil.yaml")
	require.NoError(t, os.Symlink(outside, link))
	gitCLI(t, config, "add", "-A")
	gitCLI(t, config, "commit", "-q", "-m", "a link, by hand")
	withLink := strings.TrimSpace(gitCLI(t, config, "rev-parse", "HEAD"))
	require.NoError(t, os.Remove(link))
	gitCLI(t, config, "add", "-A")
	gitCLI(t, config, "commit", "-q", "-m", "the link removed")
	head := gitCLI(t, config, "rev-parse", "HEAD")
	tree := gitCLI(t, config, "ls-files", "-s", "--debug")

	r := mcpkeepWithin(t, "rollback", "--home", home, withLink)
	assert.Equal(t, exitError, r.code)
	assert.Contains(t, r.stderr, `"personas/evil.yaml" at `+withLink+` is a symbolic link: refused, nothing was written`)
	assert.NotContains(t, r.stderr, "PRIVATE KEY")
	assert.NotContains(t, r.stderr, outside, "the link's target is not quoted")
	assert.Equal(t, head, gitCLI(t, config, "rev-parse", "HEAD"), "no commit")
	assert.Equal(t, tree, gitCLI(t, config, "ls-files", "-s", "--debug"), "the tree unchanged")
	assert.Empty(t, gitCLI(t, config, "status", "--porcelain"))
	_, err := os.Lstat(link)
	assert.ErrorIs(t, err, os.ErrNotExist)
	r = mcpkeepWithin(t, "doctor", "--home", home)
	assert.Equal(t, exitOK, r.code, "doctor finds nothing: %s", r.stdout)
}
