package barrier_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/internal/barrier"
)

// TestSyncCounts: one Sync is one barrier of as many fsyncs as ops, and
// an error names the path that failed.
func TestSyncCounts(t *testing.T) {
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, "f"))
	require.NoError(t, err)
	defer f.Close()

	var c barrier.Counter
	prev := barrier.SetCounter(&c)
	defer barrier.SetCounter(prev)

	require.NoError(t, barrier.Sync(barrier.FileOp(f), barrier.DirOp(dir)))
	require.NoError(t, barrier.Sync(barrier.DirOp(dir)))
	require.NoError(t, barrier.Sync())
	assert.Equal(t, int64(2), c.Barriers())
	assert.Equal(t, int64(3), c.Fsyncs())

	missing := filepath.Join(dir, "missing")
	err = barrier.Sync(barrier.DirOp(dir), barrier.DirOp(missing))
	require.ErrorIs(t, err, os.ErrNotExist)
	assert.Contains(t, err.Error(), missing)
}
