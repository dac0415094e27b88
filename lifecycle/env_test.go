package lifecycle_test

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/atomicfile"
	"github.com/mcpkeep/mcpkeep/gitstore"
	"github.com/mcpkeep/mcpkeep/internal/mcptest"
	"github.com/mcpkeep/mcpkeep/lifecycle"
	"github.com/mcpkeep/mcpkeep/statefile"
)

// TestEnvOutsideHarness: an Env made as a struct literal updates, rolls a
// failed update back and reports a state holding only its home.
func TestEnvOutsideHarness(t *testing.T) {
	home := t.TempDir()
	configDir := filepath.Join(home, "config")
	store, err := gitstore.Init(configDir, nil)
	require.NoError(t, err)
	defer store.Close()
	path := filepath.Join(configDir, "a.yaml")
	require.NoError(t, atomicfile.WriteFile(path, []byte("a: 1\n"), 0o600))
	_, err = store.Commit("init")
	require.NoError(t, err)
	env := &lifecycle.Env{Home: home, ConfigDir: configDir, Store: store, Logger: slog.New(slog.DiscardHandler)}

	assert.Equal(t, statefile.State{Home: home}, env.State())
	files, err := env.Files()
	require.NoError(t, err)
	assert.Equal(t, []string{"a.yaml"}, files)

	hash, err := env.Update(t.Context(), "a: 2", func(tx *lifecycle.Tx) error {
		return tx.WriteFile("a.yaml", []byte("a: 2\n"))
	})
	require.NoError(t, err)
	assert.NotEmpty(t, hash)

	boom := errors.New("boom")
	_, err = env.Update(t.Context(), "a: 3", func(tx *lifecycle.Tx) error {
		if err := tx.WriteFile("a.yaml", []byte("a: 3\n")); err != nil {
			return err
		}
		return boom
	})
	require.ErrorIs(t, err, boom)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "a: 2\n", string(data), "a failed update writes nothing")
	head, err := store.Head()
	require.NoError(t, err)
	assert.Equal(t, hash, head)
}

// TestOpenHomeLogsReclaimedLocks: OpenHome says, as Run does, which stale
// lock file it reclaimed.
func TestOpenHomeLogsReclaimedLocks(t *testing.T) {
	opts := options(t)
	require.NoError(t, run(t, opts).stop(t)) // install
	lockPath := filepath.Join(opts.Home, lifecycle.LockFile)
	require.NoError(t, os.WriteFile(lockPath, []byte(strconv.Itoa(deadPID(t))+"\n"), 0o644))
	var log logs
	env, closeEnv, err := lifecycle.OpenHome(opts.Home, slog.New(&log))
	require.NoError(t, err)
	assert.Equal(t, opts.Home, env.Home)
	require.NoError(t, closeEnv())
	reclaimed := log.Find(slog.LevelWarn, "reclaimed a stale lock")
	require.Len(t, reclaimed, 1)
	assert.Contains(t, mcptest.Attr(reclaimed[0], "detail"), lockPath)
	assert.Contains(t, mcptest.Attr(reclaimed[0], "detail"), "not running")
}
