package atomicfile_test

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/atomicfile"
	"github.com/mcpkeep/mcpkeep/internal/barrier"
	"github.com/mcpkeep/mcpkeep/internal/failpoint"
)

const (
	batchDirEnv     = "ATOMICFILE_BATCH_DIR"
	batchTempDirEnv = "ATOMICFILE_BATCH_TEMPDIR" // File.TempDir of every file, if set
)

// batchPaths are the three files a batch replaces, in order: two in one
// directory and one in another, so that a batch fsyncs two directories.
func batchPaths(dir string) []string {
	return []string{
		filepath.Join(dir, "a.yaml"),
		filepath.Join(dir, "sub", "b.yaml"),
		filepath.Join(dir, "c.yaml"),
	}
}

// newVersion is what a batch writes to the i-th file; old is what was there.
func newVersion(i int) []byte { return bytes.Repeat(fmt.Appendf(nil, "new %d ", i), 700) }
func oldVersion(i int) []byte { return bytes.Repeat(fmt.Appendf(nil, "old %d ", i), 300) }

func writeOld(t *testing.T, dir string) []string {
	t.Helper()
	paths := batchPaths(dir)
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "sub"), 0o700))
	for i, p := range paths {
		require.NoError(t, os.WriteFile(p, oldVersion(i), 0o600))
	}
	return paths
}

func batch(paths []string) []atomicfile.File {
	var files []atomicfile.File
	for i, p := range paths {
		files = append(files, atomicfile.File{Path: p, Data: newVersion(i), Perm: 0o600})
	}
	return files
}

// TestHelperBatchWriter is a child: it replaces the three files of the
// directory in its environment in one WriteFiles call.
func TestHelperBatchWriter(t *testing.T) {
	dir := os.Getenv(batchDirEnv)
	if dir == "" {
		return
	}
	files := batch(batchPaths(dir))
	for i := range files {
		files[i].TempDir = os.Getenv(batchTempDirEnv)
	}
	if err := atomicfile.WriteFiles(files...); err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// TestWriteFilesKillAtEveryFailpoint: a batch SIGKILLed at any point, and
// before any of its renames, leaves each file whole (old or new), the
// files replaced in the order given, and temporary files only for those
// not replaced, which CleanTemps removes.
func TestWriteFilesKillAtEveryFailpoint(t *testing.T) {
	cases := []struct {
		arm     string
		renamed int // how many files the kill leaves replaced
		temps   int // how many temporary files it orphans
	}{
		{"atomicfile.before-write=kill", 0, 0},
		{"atomicfile.before-fsync=kill", 0, 3},
		{"atomicfile.before-rename=kill@1", 0, 3},
		{"atomicfile.before-rename=kill@2", 1, 2},
		{"atomicfile.before-rename=kill@3", 2, 1},
		{"atomicfile.before-dir-fsync=kill", 3, 0},
	}
	covered := map[string]bool{}
	for _, c := range cases {
		covered[c.arm[:bytes.IndexByte([]byte(c.arm), '=')]] = true
	}
	for _, p := range atomicfilePoints() {
		require.True(t, covered[p], "no case kills a batch at %s", p)
	}
	for _, c := range cases {
		t.Run(c.arm, func(t *testing.T) {
			dir := t.TempDir()
			paths := writeOld(t, dir)

			cmd := exec.Command(os.Args[0], "-test.run=^TestHelperBatchWriter$")
			cmd.Env = append(os.Environ(), batchDirEnv+"="+dir, failpoint.EnvVar+"="+c.arm)
			err := cmd.Run()
			var ee *exec.ExitError
			require.ErrorAs(t, err, &ee)
			ws := ee.Sys().(syscall.WaitStatus)
			require.True(t, ws.Signaled() && ws.Signal() == syscall.SIGKILL, "child died by SIGKILL (%s)", c.arm)

			for i, p := range paths {
				got, err := os.ReadFile(p)
				require.NoError(t, err)
				want := oldVersion(i)
				if i < c.renamed {
					want = newVersion(i)
				}
				assert.True(t, bytes.Equal(want, got), "%s after a kill (%s): %d bytes, want the %d of the %s version",
					p, c.arm, len(got), len(want), map[bool]string{true: "new", false: "old"}[i < c.renamed])
			}
			var removed []string
			for _, d := range []string{dir, filepath.Join(dir, "sub")} {
				r, err := atomicfile.CleanTemps(d)
				require.NoError(t, err)
				removed = append(removed, r...)
			}
			assert.Len(t, removed, c.temps, "orphaned temporary files, beside their targets")
		})
	}
}

// TestWriteFilesErrorAtEveryFailpoint: an error at a point returns an
// error naming a file of the batch, leaves the files renamed before it
// replaced and the rest untouched, and no temporary file behind.
func TestWriteFilesErrorAtEveryFailpoint(t *testing.T) {
	cases := []struct {
		arm     string
		renamed int
	}{
		{"atomicfile.before-write=error", 0},
		{"atomicfile.before-fsync=error", 0},
		{"atomicfile.before-rename=error@1", 0},
		{"atomicfile.before-rename=error@2", 1},
		{"atomicfile.before-rename=error@3", 2},
		{"atomicfile.before-dir-fsync=error", 3},
	}
	for _, c := range cases {
		t.Run(c.arm, func(t *testing.T) {
			require.NoError(t, failpoint.Set(c.arm))
			t.Cleanup(func() { failpoint.Set("") })
			dir := t.TempDir()
			paths := writeOld(t, dir)

			err := atomicfile.WriteFiles(batch(paths)...)
			require.ErrorIs(t, err, syscall.EIO)
			var pe *fs.PathError
			require.ErrorAs(t, err, &pe)
			assert.Contains(t, pe.Path, dir, "the error names a file of the batch")
			for i, p := range paths {
				got, err := os.ReadFile(p)
				require.NoError(t, err)
				if i < c.renamed {
					assert.Equal(t, newVersion(i), got, "%s was renamed before the error", p)
				} else {
					assert.Equal(t, oldVersion(i), got, "%s is untouched", p)
				}
			}
			for _, d := range []string{dir, filepath.Join(dir, "sub")} {
				removed, err := atomicfile.CleanTemps(d)
				require.NoError(t, err)
				assert.Empty(t, removed, "no temporary file left in %s", d)
			}
		})
	}
}

func TestWriteFilesRefusesAPathTwice(t *testing.T) {
	dir := t.TempDir()
	paths := writeOld(t, dir)
	files := batch(paths)
	files = append(files, atomicfile.File{Path: filepath.Join(dir, "sub", "..", "a.yaml"), Data: []byte("again")})

	err := atomicfile.WriteFiles(files...)
	var pe *fs.PathError
	require.ErrorAs(t, err, &pe)
	assert.Contains(t, err.Error(), "a.yaml")
	for i, p := range paths {
		got, err := os.ReadFile(p)
		require.NoError(t, err)
		assert.Equal(t, oldVersion(i), got, "nothing is written")
	}
}

// TestWriteFilesMissingDirectory: a file whose directory does not exist
// fails the batch before any rename; the temporary files of the others are
// removed.
func TestWriteFilesMissingDirectory(t *testing.T) {
	dir := t.TempDir()
	paths := writeOld(t, dir)
	files := batch(paths)
	files = append(files, atomicfile.File{Path: filepath.Join(dir, "nowhere", "d.yaml"), Data: []byte("d")})

	err := atomicfile.WriteFiles(files...)
	require.ErrorIs(t, err, fs.ErrNotExist)
	for i, p := range paths {
		got, err := os.ReadFile(p)
		require.NoError(t, err)
		assert.Equal(t, oldVersion(i), got)
	}
	for _, d := range []string{dir, filepath.Join(dir, "sub")} {
		removed, err := atomicfile.CleanTemps(d)
		require.NoError(t, err)
		assert.Empty(t, removed)
	}
}

func TestWriteFilesModes(t *testing.T) {
	dir := t.TempDir()
	kept := filepath.Join(dir, "kept")
	require.NoError(t, os.WriteFile(kept, []byte("x"), 0o640))
	require.NoError(t, os.Chmod(kept, 0o640))
	err := atomicfile.WriteFiles(
		atomicfile.File{Path: kept, Data: []byte("y")},
		atomicfile.File{Path: filepath.Join(dir, "new"), Data: []byte("z")},
		atomicfile.File{Path: filepath.Join(dir, "object"), Data: []byte("o"), Perm: 0o444},
	)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o640), mode(t, kept), "an existing file keeps its mode")
	assert.Equal(t, atomicfile.DefaultPerm, mode(t, filepath.Join(dir, "new")))
	assert.Equal(t, os.FileMode(0o444), mode(t, filepath.Join(dir, "object")))
	assert.NoError(t, atomicfile.WriteFiles(), "an empty batch does nothing")
}

// TestErrorsNameTheTarget: an error writing, syncing or renaming a
// temporary file names the file the caller asked for, not the temporary
// file, keeps its cause, and says what to do about a missing directory.
func TestErrorsNameTheTarget(t *testing.T) {
	cases := []struct {
		name  string
		arm   string // failpoint, or ""
		path  func(dir string) string
		cause error
		says  string
	}{
		{
			name:  "missing directory",
			path:  func(dir string) string { return filepath.Join(dir, "no", "config.yaml") },
			cause: fs.ErrNotExist,
			says:  "its directory does not exist (create it first)",
		},
		{
			name: "rename over a directory",
			path: func(dir string) string {
				p := filepath.Join(dir, "config.yaml")
				require.NoError(t, os.Mkdir(p, 0o700))
				return p
			},
			cause: fs.ErrExist, // os.Rename will not replace a directory
		},
		{
			name:  "fsync",
			arm:   "atomicfile.before-fsync=error",
			path:  func(dir string) string { return filepath.Join(dir, "config.yaml") },
			cause: syscall.EIO,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			require.NoError(t, failpoint.Set(c.arm))
			t.Cleanup(func() { failpoint.Set("") })
			dir := t.TempDir()
			path := c.path(dir)

			err := atomicfile.WriteFile(path, []byte("x"), 0)
			require.ErrorIs(t, err, c.cause)
			var pe *fs.PathError
			require.ErrorAs(t, err, &pe)
			assert.Equal(t, path, pe.Path, "the error names the target")
			assert.NotContains(t, err.Error(), ".mcpkeep-tmp", "and not its temporary file")
			if c.says != "" {
				assert.Contains(t, err.Error(), c.says)
			}
			removed, err := atomicfile.CleanTemps(dir)
			require.NoError(t, err)
			assert.Empty(t, removed, "no temporary file left behind")
		})
	}
	t.Run("CopyNew", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "no", "config.yaml.bak")
		_, err := atomicfile.CopyNew(path, []byte("x"), 0)
		require.ErrorIs(t, err, fs.ErrNotExist)
		var pe *fs.PathError
		require.ErrorAs(t, err, &pe)
		assert.Equal(t, path, pe.Path)
	})
}

// TestWriteFilesTempDir: with File.TempDir the temporary files are made
// there, not beside their targets: a kill before the renames leaves them in
// TempDir alone, where CleanTemps finds them, and a write that returns
// leaves none anywhere.
func TestWriteFilesTempDir(t *testing.T) {
	dir := t.TempDir()
	paths := writeOld(t, dir)
	temps := filepath.Join(dir, "temps")
	require.NoError(t, os.Mkdir(temps, 0o700))

	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperBatchWriter$")
	cmd.Env = append(os.Environ(), batchDirEnv+"="+dir, batchTempDirEnv+"="+temps,
		failpoint.EnvVar+"=atomicfile.before-rename=kill@2")
	err := cmd.Run()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	require.True(t, ee.Sys().(syscall.WaitStatus).Signaled())
	for _, d := range []string{dir, filepath.Join(dir, "sub")} {
		removed, err := atomicfile.CleanTemps(d)
		require.NoError(t, err)
		assert.Empty(t, removed, "no temporary file beside the targets in %s", d)
	}
	removed, err := atomicfile.CleanTemps(temps)
	require.NoError(t, err)
	assert.Len(t, removed, 2, "the two files not yet renamed left theirs in TempDir")
	got, err := os.ReadFile(paths[0])
	require.NoError(t, err)
	assert.Equal(t, newVersion(0), got, "the first was renamed across directories")

	files := batch(paths)
	for i := range files {
		files[i].TempDir = temps
	}
	require.NoError(t, atomicfile.WriteFiles(files...))
	for i, p := range paths {
		got, err := os.ReadFile(p)
		require.NoError(t, err)
		assert.Equal(t, newVersion(i), got)
		assert.Equal(t, os.FileMode(0o600), mode(t, p))
	}
	entries, err := os.ReadDir(temps)
	require.NoError(t, err)
	assert.Empty(t, entries)
}

// TestBatchSteps: a Batch in steps replaces its files as WriteFiles does,
// fsyncs the extra file and directory of Sync and SyncDirs in the same
// barriers, leaves NoSync files out of both, and Cleanup removes the
// temporary files a failed batch left.
func TestBatchSteps(t *testing.T) {
	dir := t.TempDir()
	sub := filepath.Join(dir, "sub")
	require.NoError(t, os.Mkdir(sub, 0o700))
	extra, err := os.Create(filepath.Join(dir, "journal"))
	require.NoError(t, err)
	defer extra.Close()
	var c barrier.Counter
	defer barrier.SetCounter(barrier.SetCounter(&c))

	b, err := atomicfile.Prepare(
		atomicfile.File{Path: filepath.Join(dir, "a"), Data: []byte("a")},
		atomicfile.File{Path: filepath.Join(dir, "cache"), Data: []byte("c"), NoSync: true})
	require.NoError(t, err)
	defer b.Cleanup()
	_, err = os.Stat(filepath.Join(dir, "a"))
	require.ErrorIs(t, err, fs.ErrNotExist, "nothing is in place before Rename")
	require.NoError(t, b.Sync(extra))
	require.NoError(t, b.Rename())
	require.NoError(t, b.SyncDirs(sub))
	assert.Equal(t, int64(2), c.Barriers())
	assert.Equal(t, int64(2+2), c.Fsyncs(), "a and the journal; dir and sub; never the cache")
	for name, want := range map[string]string{"a": "a", "cache": "c"} {
		got, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		assert.Equal(t, want, string(got))
	}

	failed, err := atomicfile.Prepare(atomicfile.File{Path: filepath.Join(dir, "b"), Data: []byte("b")})
	require.NoError(t, err)
	failed.Cleanup()
	failed.Cleanup()
	removed, err := atomicfile.CleanTemps(dir)
	require.NoError(t, err)
	assert.Empty(t, removed, "Cleanup left no temporary file")
}
