package diskfloor

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestReplace(t *testing.T) {
	dir := t.TempDir()
	for i := range 3 {
		d, err := Replace(dir, i)
		require.NoError(t, err)
		assert.Positive(t, d)
	}
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "the temporary files are renamed away")
	data, err := os.ReadFile(filepath.Join(dir, "f"))
	require.NoError(t, err)
	assert.Len(t, data, 1024)

	_, err = Replace(filepath.Join(dir, "missing"), 0)
	assert.ErrorIs(t, err, os.ErrNotExist)
}
