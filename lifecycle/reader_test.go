package lifecycle_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/atomicfile"
	"github.com/mcpkeep/mcpkeep/lifecycle"
	"github.com/mcpkeep/mcpkeep/recovery"
)

// TestRunMaxFileSize: Options.MaxFileSize reaches start-up recovery, which
// quarantines a larger config file and restores it from git, and
// Env.Reader, which refuses a larger file and a link below ConfigDir, and
// reads a path relative to ConfigDir.
func TestRunMaxFileSize(t *testing.T) {
	opts := options(t)
	require.NoError(t, run(t, opts).stop(t)) // installs the home
	notes := filepath.Join(opts.Home, "config", "notes.yaml")
	require.NoError(t, os.WriteFile(notes, []byte("notes: ["+strings.Repeat("x", 60)+"]\n"), 0o600))

	opts.MaxFileSize = 50
	var env *lifecycle.Env
	opts.NewServer = func(e *lifecycle.Env) (*mcp.Server, error) {
		env = e
		return newServer(e)
	}
	r := run(t, opts)
	require.NotNil(t, env)
	assert.Equal(t, int64(50), env.MaxFileSize)
	require.Len(t, env.Report.Findings, 1, "%s", env.Report)
	f := env.Report.Findings[0]
	assert.Equal(t, recovery.KindRefusedFile, f.Kind)
	assert.Equal(t, "config/notes.yaml", f.Path)
	assert.Contains(t, f.Action, "restored from commit")

	data, err := env.Reader().ReadFile(notes)
	require.NoError(t, err)
	assert.Equal(t, "notes: []\n", string(data))
	data, err = env.Reader().ReadFile("notes.yaml")
	require.NoError(t, err, "a relative path is relative to ConfigDir")
	assert.Equal(t, "notes: []\n", string(data))
	require.NoError(t, os.WriteFile(notes, []byte(strings.Repeat("#", 51)), 0o600))
	_, err = env.Reader().ReadFile(notes)
	require.ErrorIs(t, err, atomicfile.ErrTooLarge)
	require.NoError(t, os.Remove(notes))
	require.NoError(t, os.Symlink(filepath.Join(opts.Home, "state.json"), notes))
	_, err = env.Reader().ReadFile(notes)
	require.ErrorIs(t, err, atomicfile.ErrNotRegular)
	require.NoError(t, os.Remove(notes))
	require.NoError(t, r.stop(t))
}

// TestLockFileThatIsNotAFile: a PID lock file that is a fifo, or a link to
// a file elsewhere, blocks neither TryLock nor Check: TryLock moves it to
// backups/ as it is and says so, and Check reports one that replaces the
// PID file later.
func TestLockFileThatIsNotAFile(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "secret")
	require.NoError(t, os.WriteFile(outside, []byte("12345\n"), 0o600))
	for name, plant := range map[string]func(string) error{
		"fifo": func(p string) error { return syscall.Mkfifo(p, 0o600) },
		"link": func(p string) error { return os.Symlink(outside, p) },
	} {
		t.Run(name, func(t *testing.T) {
			home := t.TempDir()
			path := filepath.Join(home, lifecycle.LockFile)
			require.NoError(t, plant(path))
			var l *lifecycle.HomeLock
			var err error
			within(t, func() { l, err = lifecycle.TryLock(home) })
			require.NoError(t, err)
			defer l.Unlock()
			require.Len(t, l.Reclaimed(), 1)
			assert.Contains(t, l.Reclaimed()[0], "not a PID file; moved to "+filepath.Join(home, "backups"))
			saved, err := filepath.Glob(filepath.Join(home, "backups", lifecycle.LockFile+".*.bak"))
			require.NoError(t, err)
			require.Len(t, saved, 1)
			fi, err := os.Lstat(saved[0])
			require.NoError(t, err)
			assert.False(t, fi.Mode().IsRegular(), "moved as it is")
			b, err := os.ReadFile(outside)
			require.NoError(t, err)
			assert.Equal(t, "12345\n", string(b), "a link's target is untouched")

			require.NoError(t, os.Remove(path))
			require.NoError(t, plant(path))
			within(t, func() { err = l.Check() })
			assert.ErrorIs(t, err, atomicfile.ErrNotRegular)
			require.NoError(t, os.Remove(path))
		})
	}
}

// within runs fn, failing t if it has not returned after hangAfter.
func within(t *testing.T, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); fn() }()
	select {
	case <-done:
	case <-time.After(hangAfter):
		t.Fatalf("still blocked after %v", hangAfter)
	}
}
