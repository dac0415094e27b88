package lifecycle_test

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/bootstrap"
	"github.com/mcpkeep/mcpkeep/lifecycle"
)

// TestOpenHomeRefusesWhatIsNoHome: OpenHome opens an installed home and
// installs none, so a mistyped path (a ~ no shell expanded, a home that
// does not exist, the user's own home directory, a home's parent, a file)
// is refused before anything is created or locked: the error names the
// path and the fix, matches ErrNotHome (and fs.ErrNotExist for a missing
// path), and the directory tree is as it was, byte for byte.
func TestOpenHomeRefusesWhatIsNoHome(t *testing.T) {
	root := t.TempDir()
	t.Chdir(root) // "~/.helios" is relative: nothing may appear here either
	home := filepath.Join(root, "home")
	_, err := bootstrap.Ensure(t.Context(), bootstrap.Spec{Home: home, Schema: 1})
	require.NoError(t, err)
	user := filepath.Join(root, "user") // a user's home directory: files of theirs
	require.NoError(t, os.MkdirAll(filepath.Join(user, "Documents"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(user, ".bashrc"), []byte("alias ll='ls -l'\n"), 0o600))
	empty := filepath.Join(root, "empty")
	require.NoError(t, os.Mkdir(empty, 0o700))
	file := filepath.Join(root, "file")
	require.NoError(t, os.WriteFile(file, []byte("x\n"), 0o600))

	for _, tc := range []struct {
		name, path string
		fix        string
		missing    bool // also matches fs.ErrNotExist
	}{
		{"tilde", "~/.helios", "only a shell expands", false},
		{"tilde alone", "~", "only a shell expands", false},
		{"missing", filepath.Join(root, ".heilos"), "check the path; a server creates the home on its first start", true},
		{"user's home", user, "no " + bootstrap.VersionFile + " stamp and no config/.git repository", false},
		{"home's parent", root, "no " + bootstrap.VersionFile + " stamp and no config/.git repository", false},
		{"empty", empty, "check the path; a server creates the home on its first start", false},
		{"file", file, "not a directory", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := treeOf(t, root)
			env, closeEnv, err := lifecycle.OpenHome(tc.path, nil)
			if err == nil {
				closeEnv()
			}
			require.Error(t, err)
			assert.Nil(t, env)
			assert.Contains(t, err.Error(), tc.path)
			assert.Contains(t, err.Error(), tc.fix)
			assert.ErrorIs(t, err, lifecycle.ErrNotHome)
			assert.Equal(t, tc.missing, errors.Is(err, fs.ErrNotExist), "%v", err)
			assert.Equal(t, before, treeOf(t, root), "nothing is written")
		})
	}

	env, closeEnv, err := lifecycle.OpenHome(home, nil)
	require.NoError(t, err, "an installed home opens")
	assert.Equal(t, home, env.Home)
	require.NoError(t, closeEnv())
}

// treeOf maps every path under root to its mode and, for a file, a hash
// of its bytes.
func treeOf(t *testing.T, root string) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		v := fi.Mode().String()
		if fi.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			v += fmt.Sprintf(" %x", sha256.Sum256(b))
		}
		m[p] = v
		return nil
	})
	require.NoError(t, err)
	return m
}
