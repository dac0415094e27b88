//go:build unix

package gitstore_test

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/gitstore"
)

// initDirs are the directories go-git's Init makes in .git.
var initDirs = []string{"objects", "objects/info", "objects/pack", "refs", "refs/heads", "refs/tags"}

// TestNothingWritableByOthers: with the usual umask of 022, nothing a store
// makes in its work tree or its repository is writable by another user,
// and every directory in .git is 0700, as .git is. go-git asks for 0777
// directories, counting on the umask, and gitstore made them exactly
// that.
func TestNothingWritableByOthers(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)

	dir := filepath.Join(t.TempDir(), "config")
	s, err := gitstore.Init(dir, &gitstore.Options{PackThreshold: 4})
	require.NoError(t, err)
	defer s.Close()
	for i := range 3 { // loose objects, then a pack (PackThreshold)
		write(t, dir, fmt.Sprintf("d%d/a.yaml", i), fmt.Sprintf("a: %d\n", i))
		_, err := s.Commit(fmt.Sprintf("commit %d", i))
		require.NoError(t, err)
	}
	c, err := s.Stage("staged", []gitstore.Change{put("e/b.yaml", "b: 1\n")}) // the journal
	require.NoError(t, err)
	require.NotNil(t, c)
	require.NoError(t, s.Apply())
	require.NoError(t, s.Flush())
	require.NoError(t, s.Tag("v1", "a tag"))
	require.NoError(t, s.Close())
	for _, d := range initDirs {
		require.DirExists(t, filepath.Join(dir, ".git", d), "the test makes every directory Init makes")
	}

	var writable, gitDirs []string // what others may write in; directories of .git not 0700
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if fi.Mode().Perm()&0o022 != 0 {
			writable = append(writable, fmt.Sprintf("%s %v", rel, fi.Mode()))
		}
		if d.IsDir() && (rel == ".git" || strings.HasPrefix(rel, ".git"+string(filepath.Separator))) {
			if fi.Mode().Perm() != 0o700 {
				gitDirs = append(gitDirs, fmt.Sprintf("%s %v", rel, fi.Mode()))
			}
		}
		return nil
	})
	require.NoError(t, err)
	assert.Empty(t, writable, "group- or world-writable")
	assert.Empty(t, gitDirs, "directories in .git not 0700, as .git is")
}

// TestOpenMakesInitDirsPrivate: a repository whose Init left .git/objects,
// .git/refs and the directories in them 0777 (gitstore did before) has
// them made 0700 by an Open that holds the home lock, which says so in
// Repairs; a ReadOnly Open says it would, and changes nothing.
func TestOpenMakesInitDirsPrivate(t *testing.T) {
	dir := t.TempDir()
	s, err := gitstore.Init(dir, nil)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	mode := func(d string) fs.FileMode {
		fi, err := os.Stat(filepath.Join(dir, ".git", d))
		require.NoError(t, err)
		return fi.Mode().Perm()
	}
	for _, d := range initDirs {
		require.Equal(t, fs.FileMode(0o700), mode(d), "Init makes %s 0700", d)
		require.NoError(t, os.Chmod(filepath.Join(dir, ".git", d), 0o777))
	}
	const what = "restored mode 0700 of .git/objects, .git/objects/info, .git/objects/pack, .git/refs, .git/refs/heads, .git/refs/tags, which other users could write in"

	ro, err := gitstore.Open(dir, &gitstore.Options{ReadOnly: true})
	require.NoError(t, err)
	assert.Equal(t, []string{"would be " + what}, ro.Repairs())
	require.NoError(t, ro.Close())
	for _, d := range initDirs {
		assert.Equal(t, fs.FileMode(0o777), mode(d), "a ReadOnly Open changes nothing: %s", d)
	}

	s, err = gitstore.Open(dir, &gitstore.Options{HoldsLock: true})
	require.NoError(t, err)
	assert.Equal(t, []string{what}, s.Repairs())
	require.NoError(t, s.Close())
	for _, d := range initDirs {
		assert.Equal(t, fs.FileMode(0o700), mode(d), d)
	}

	s, err = gitstore.Open(dir, &gitstore.Options{HoldsLock: true})
	require.NoError(t, err)
	assert.Empty(t, s.Repairs(), "once is enough")
	require.NoError(t, s.Close())
}
