package bootstrap_test

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

	"github.com/mcpkeep/mcpkeep/bootstrap"
	"github.com/mcpkeep/mcpkeep/gitstore"
)

// TestLostStampNamesTheServerByHistory: a named server's install commit
// names it, so a home whose stamp is lost (deleted, or garbage) is still
// refused to another server, which leaves it as it is; its own server
// resumes it and its stamp names it again.
func TestLostStampNamesTheServerByHistory(t *testing.T) {
	for name, lose := range map[string]func(path string) error{
		"missing": os.Remove,
		"garbage": func(path string) error { return os.WriteFile(path, []byte("garbage\n"), 0o600) },
	} {
		t.Run(name, func(t *testing.T) {
			home := filepath.Join(t.TempDir(), "home")
			todo := spec(home)
			todo.Server = "todo"
			_, err := bootstrap.Ensure(t.Context(), todo)
			require.NoError(t, err)
			assert.Equal(t, []string{`install: schema 1 of server "todo"`}, commitMessages(t, home))

			// A later commit whose message a client chose, in the install's
			// words, names nobody.
			store, err := gitstore.Open(filepath.Join(home, bootstrap.ConfigDir), &gitstore.Options{HoldsLock: true})
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(filepath.Join(home, bootstrap.ConfigDir, "note.yaml"), []byte("a: 1\n"), 0o600))
			_, err = store.Commit(`install: schema 1 of server "helios" -- a note`)
			require.NoError(t, err)
			require.NoError(t, store.Close())
			// A stale git lock the refusal must leave as it is.
			require.NoError(t, os.WriteFile(filepath.Join(home, bootstrap.ConfigDir, ".git", "index.lock"), nil, 0o600))

			stamp := filepath.Join(home, bootstrap.VersionFile)
			require.NoError(t, lose(stamp))
			before := treeHash(t, home)
			other := spec(home)
			other.Server = "other"
			_, err = bootstrap.Ensure(t.Context(), other)
			var oe *bootstrap.OtherServerError
			require.ErrorAs(t, err, &oe)
			assert.Equal(t, "todo", oe.Stamped)
			assert.Contains(t, err.Error(), "the install commit of its config/ history says so")
			assert.Equal(t, before, treeHash(t, home), "the refusal touched nothing")
			assert.FileExists(t, filepath.Join(home, bootstrap.ConfigDir, ".git", "index.lock"), "nor repaired the repository")
			entries, _ := os.ReadDir(filepath.Join(home, bootstrap.BackupsDir))
			assert.Empty(t, entries, "the stamp was not moved aside either")

			res, err := bootstrap.Ensure(t.Context(), todo)
			require.NoError(t, err)
			assert.True(t, res.Resumed)
			assert.Equal(t, "todo", res.After.Server)
			assert.Equal(t, []string{`install: schema 1 of server "helios" -- a note`, `install: schema 1 of server "todo"`},
				commitMessages(t, home), "no second install")
		})
	}
}

const ensureAsHomeEnv = "BOOTSTRAP_ENSURE_AS_HOME"

// TestHelperEnsureAs is a child: it runs Ensure for server "todo" on the
// home in its environment and prints the error, if any.
func TestHelperEnsureAs(t *testing.T) {
	home := os.Getenv(ensureAsHomeEnv)
	if home == "" {
		return
	}
	s := spec(home)
	s.Server = "todo"
	if _, err := bootstrap.Ensure(t.Context(), s); err != nil {
		fmt.Print(err)
		os.Exit(1)
	}
	os.Exit(0)
}

// TestUnreadableConfigKeepsTheStamp: a config/ the server's user cannot
// read is an error that says so and what to do; the home is not taken
// for an interrupted install, so its good stamp stays where it is (before,
// it was moved into backups/ and the home lost its server's name).
func TestUnreadableConfigKeepsTheStamp(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	todo := spec(home)
	todo.Server = "todo"
	_, err := bootstrap.Ensure(t.Context(), todo)
	require.NoError(t, err)
	stamp, err := os.ReadFile(filepath.Join(home, bootstrap.VersionFile))
	require.NoError(t, err)

	const nobody = 65534
	if os.Geteuid() == 0 { // root reads whatever the mode: be nobody
		for dir := filepath.Dir(home); dir != os.TempDir() && dir != "/"; dir = filepath.Dir(dir) {
			require.NoError(t, os.Chmod(dir, 0o711))
		}
		require.NoError(t, filepath.WalkDir(home, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			return os.Lchown(p, nobody, nobody)
		}))
	}
	config := filepath.Join(home, bootstrap.ConfigDir)
	require.NoError(t, os.Chmod(config, 0))
	t.Cleanup(func() { os.Chmod(config, 0o700) })

	self, err := os.Executable()
	require.NoError(t, err)
	bin := filepath.Join(filepath.Dir(home), "bootstrap.test")
	b, err := os.ReadFile(self)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(bin, b, 0o755))
	cmd := exec.Command(bin, "-test.run=^TestHelperEnsureAs$")
	cmd.Env = append(os.Environ(), ensureAsHomeEnv+"="+home)
	if os.Geteuid() == 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody, Groups: []uint32{}}}
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.Error(t, err, "Ensure on an unreadable config/ succeeded: %s", out)
	assert.Contains(t, string(out), "permission denied", stderr.String())
	assert.Contains(t, string(out), "must belong to the user the server runs as")

	after, err := os.ReadFile(filepath.Join(home, bootstrap.VersionFile))
	require.NoError(t, err, "the stamp is where it was")
	assert.Equal(t, stamp, after)
	entries, _ := os.ReadDir(filepath.Join(home, bootstrap.BackupsDir))
	assert.Empty(t, entries, "nothing quarantined")
}
