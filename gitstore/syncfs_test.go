package gitstore

import (
	"io"
	iofs "io/fs"
	"os"
	"path/filepath"
	"reflect"
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

// TestSyncFSReadsPackIndexWhole: a pack index opened through syncFS, as
// go-git opens it to decode it with reads of a few bytes each, is read
// whole at once, and reads, seeks and reads at offsets as the file on disk
// would, refusing writes; any other file opened for reading is the file
// itself.
func TestSyncFSReadsPackIndexWhole(t *testing.T) {
	dir := t.TempDir()
	fs := syncFS{osfs.New(dir)}
	data := []byte("\xfftOc\x00\x00\x00\x02 the rest of a pack index")
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "objects", "pack"), 0o700))
	for _, name := range []string{"pack-1.idx", "pack-1.pack"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, "objects", "pack", name), data, 0o600))
	}

	f, err := fs.Open(fs.Join("objects", "pack", "pack-1.idx"))
	require.NoError(t, err)
	require.IsType(t, &memFile{}, f)
	assert.Equal(t, fs.Join("objects", "pack", "pack-1.idx"), f.Name())
	head := make([]byte, 4)
	_, err = io.ReadFull(f, head)
	require.NoError(t, err)
	assert.Equal(t, data[:4], head)
	rest, err := io.ReadAll(f)
	require.NoError(t, err)
	assert.Equal(t, data[4:], rest)
	_, err = f.Seek(8, io.SeekStart)
	require.NoError(t, err)
	at := make([]byte, 4)
	_, err = f.ReadAt(at, 1)
	require.NoError(t, err)
	assert.Equal(t, data[1:5], at)
	_, err = f.Write([]byte("x"))
	require.ErrorIs(t, err, iofs.ErrPermission)
	require.ErrorIs(t, f.Truncate(0), iofs.ErrPermission)
	require.NoError(t, f.Close())

	other, err := fs.Open(fs.Join("objects", "pack", "pack-1.pack"))
	require.NoError(t, err)
	assert.NotEqual(t, reflect.TypeOf(&memFile{}), reflect.TypeOf(other), "a pack is read as go-git reads it")
	require.NoError(t, other.Close())

	_, err = fs.Open(fs.Join("objects", "pack", "pack-2.idx"))
	require.ErrorIs(t, err, iofs.ErrNotExist)
}

// TestWithoutPacksHidesOnlyThePacksNamed: the view packing moves the store
// to before it deletes the merged packs lists the other packs, and lists
// every other directory whole.
func TestWithoutPacksHidesOnlyThePacksNamed(t *testing.T) {
	dir := t.TempDir()
	files := []string{"objects/pack/pack-a.pack", "objects/pack/pack-a.idx", "objects/pack/pack-b.pack",
		"objects/pack/pack-b.idx", "objects/info/pack-a.pack"}
	for _, f := range files {
		p := filepath.Join(dir, filepath.FromSlash(f))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, nil, 0o644))
	}
	fs := withoutPacks{syncFS{osfs.New(dir)}, map[string]bool{"pack-a.pack": true}}
	names := func(dir string) []string {
		infos, err := fs.ReadDir(dir)
		require.NoError(t, err)
		var out []string
		for _, fi := range infos {
			out = append(out, fi.Name())
		}
		return out
	}
	assert.Equal(t, []string{"pack-a.idx", "pack-b.idx", "pack-b.pack"}, names("objects/pack"))
	assert.Equal(t, []string{"pack-a.idx", "pack-b.idx", "pack-b.pack"}, names(filepath.Join("objects", "pack")))
	assert.Equal(t, []string{"pack-a.pack"}, names("objects/info"))
}
