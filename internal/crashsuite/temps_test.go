package crashsuite_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOrphanTemps tells the temporary file of a live write, which the
// running server renames into place while the check waits (its journal's
// flush after a start that merged from a git remote), from a dead
// write's, which stays.
func TestOrphanTemps(t *testing.T) {
	put := func(t *testing.T, dir, rel string) string {
		t.Helper()
		p := filepath.Join(dir, filepath.FromSlash(rel))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o700))
		require.NoError(t, os.WriteFile(p, []byte("x"), 0o600))
		return p
	}

	t.Run("none", func(t *testing.T) {
		dir := t.TempDir()
		put(t, dir, "config/.git/refs/heads/main")
		got, err := orphanTemps(dir, time.Hour, func([]string) { t.Error("found a temporary file in a home with none") })
		require.NoError(t, err)
		assert.Empty(t, got)
	})

	t.Run("live write", func(t *testing.T) {
		dir := t.TempDir()
		ref := put(t, dir, "config/.git/refs/heads/.main.mcpkeep-tmp3866520921671266191")
		pack := put(t, dir, "config/.git/objects/pack/.pack-4c10.idx.mcpkeep-tmp77")
		done := make(chan error, 1)
		got, err := orphanTemps(dir, time.Minute, func(found []string) {
			assert.ElementsMatch(t, []string{ref, pack}, found)
			go func() { // the server's flush finishes: rename, remove
				done <- errors.Join(os.Rename(ref, filepath.Join(filepath.Dir(ref), "main")), os.Remove(pack))
			}()
		})
		require.NoError(t, err)
		require.NoError(t, <-done)
		assert.Empty(t, got, "the temporary files of a write that finished are not orphans")
	})

	t.Run("dead write", func(t *testing.T) {
		dir := t.TempDir()
		ref := put(t, dir, "config/.git/refs/heads/.main.mcpkeep-tmp89")
		obj := put(t, dir, "config/.git/objects/tmp_obj_abc")
		put(t, dir, "config/personas/default.yaml")
		got, err := orphanTemps(dir, 50*time.Millisecond, nil)
		require.NoError(t, err)
		assert.ElementsMatch(t, []string{ref, obj}, got)
	})
}
