package gitstore

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/go-git/go-billy/v5/osfs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSyncFSSyncsWhatGoGitWrites: every file written through syncFS, as
// go-git writes objects (a temporary file, then a rename) and refs, is
// fsynced. Before, the file osfs returns hid Sync behind billy's chroot
// wrapper and nothing was: a power cut left empty loose objects (found by
// the crash suite's power cuts).
func TestSyncFSSyncsWhatGoGitWrites(t *testing.T) {
	dir := t.TempDir()
	var synced []string
	orig := fsyncFile
	fsyncFile = func(path string) error {
		synced = append(synced, path)
		return orig(path)
	}
	t.Cleanup(func() { fsyncFile = orig })
	fs := syncFS{osfs.New(dir)}

	tmp, err := fs.TempFile(fs.Join("objects", "pack"), "tmp_obj_")
	require.NoError(t, err)
	_, err = tmp.Write([]byte("object"))
	require.NoError(t, err)
	require.NoError(t, tmp.Close())
	require.NoError(t, fs.Rename(tmp.Name(), fs.Join("objects", "ab", "cdef")))

	ref, err := fs.Create(fs.Join("refs", "heads", "main"))
	require.NoError(t, err)
	_, err = ref.Write([]byte("0123\n"))
	require.NoError(t, err)
	require.NoError(t, ref.Close())

	unwritten, err := fs.Create("empty")
	require.NoError(t, err)
	require.NoError(t, unwritten.Close())

	assert.True(t, slices.Contains(synced, filepath.Join(dir, tmp.Name())), "the object, before its rename: %q", synced)
	assert.True(t, slices.Contains(synced, filepath.Join(dir, "refs", "heads", "main")), "the ref: %q", synced)
	assert.False(t, slices.Contains(synced, filepath.Join(dir, "empty")), "a file never written needs no fsync")
}
