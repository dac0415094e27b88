package lifecycle_test

import (
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/gitstore"
	"github.com/mcpkeep/mcpkeep/lifecycle"
)

// handEdits makes, in the config of home, what a person's editing can
// leave: a good new file, a YAML file that does not parse, and a link to
// a file outside the home.
func handEdits(t *testing.T, home string) {
	t.Helper()
	config := filepath.Join(home, "config")
	require.NoError(t, os.WriteFile(filepath.Join(config, "good.yaml"), []byte("by: hand\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(config, "bad.yaml"), []byte("title: [broken\n"), 0o600))
	outside := filepath.Join(t.TempDir(), "passwd")
	require.NoError(t, os.WriteFile(outside, []byte("root:x:0:0\n"), 0o600))
	require.NoError(t, os.Symlink(outside, filepath.Join(config, "pw.yaml")))
}

// committed lists the files of HEAD in home's config.
func committed(t *testing.T, home string) []string {
	t.Helper()
	out, err := exec.Command("git", "-C", filepath.Join(home, "config"), "ls-tree", "-r", "--name-only", "HEAD").Output()
	require.NoError(t, err)
	return strings.Fields(string(out))
}

// TestCommitLeavesOutWhatTheNextStartWouldNotKeep: Env.Commit commits the
// good hand edit and leaves out a corrupt file and a link, returning the
// commit's hash with an error matching *gitstore.LeftOutError that names
// both and says what becomes of them.
func TestCommitLeavesOutWhatTheNextStartWouldNotKeep(t *testing.T) {
	opts := options(t)
	require.NoError(t, run(t, opts).stop(t)) // install
	home := opts.Home
	handEdits(t, home)
	env, closeEnv, err := lifecycle.OpenHome(home, nil)
	require.NoError(t, err)
	defer closeEnv()
	hash, err := env.Commit("hand edits")
	var left *gitstore.LeftOutError
	require.ErrorAs(t, err, &left)
	assert.NotEmpty(t, hash)
	assert.Equal(t, hash, left.Commit)
	var paths []string
	for _, f := range left.Files {
		paths = append(paths, f.Path)
	}
	assert.ElementsMatch(t, []string{"bad.yaml", "pw.yaml"}, paths)
	assert.Contains(t, err.Error(), "moves it to backups/")
	assert.Contains(t, committed(t, home), "good.yaml")
	assert.NotContains(t, committed(t, home), "bad.yaml")
	assert.NotContains(t, committed(t, home), "pw.yaml")
}

// TestShutdownCommitLeavesOut: a stop (stdin closed) on a config holding
// a link and a corrupt file commits the good hand edit, logs each file it
// left out, and is a clean stop; the next start moves the two aside.
func TestShutdownCommitLeavesOut(t *testing.T) {
	opts := options(t)
	var log logs
	opts.Logger = slog.New(&log)
	r := run(t, opts)
	handEdits(t, opts.Home)
	require.NoError(t, r.stop(t), "a clean stop")
	assert.Len(t, log.Find(slog.LevelWarn, "left out of the shutdown commit: the next start moves it to backups/"), 2)
	files := committed(t, opts.Home)
	assert.Contains(t, files, "good.yaml")
	assert.NotContains(t, files, "pw.yaml")

	opts.Logger = nil
	require.NoError(t, run(t, opts).stop(t))
	_, err := os.Lstat(filepath.Join(opts.Home, "config", "pw.yaml"))
	assert.ErrorIs(t, err, os.ErrNotExist, "the next start moved the link aside")
}

// TestCommitRefusesBootstrapsWords: Commit, as Update, refuses a message
// in the words of bootstrap's install and migrate commits, which a home
// whose stamp is lost is read by (a tool may pass its client's words on),
// and commits nothing.
func TestCommitRefusesBootstrapsWords(t *testing.T) {
	opts := options(t)
	require.NoError(t, run(t, opts).stop(t)) // install
	require.NoError(t, os.WriteFile(filepath.Join(opts.Home, "config", "mine.yaml"), []byte("a: 1\n"), 0o600))
	env, closeEnv, err := lifecycle.OpenHome(opts.Home, nil)
	require.NoError(t, err)
	defer closeEnv()
	before, err := env.Store.Head()
	require.NoError(t, err)
	for _, msg := range []string{"migrate v1→v9", "  install: schema 9 of server \"x\""} {
		hash, err := env.Commit(msg)
		require.Error(t, err, msg)
		assert.Contains(t, err.Error(), "give the change other words", msg)
		assert.Empty(t, hash, msg)
	}
	after, err := env.Store.Head()
	require.NoError(t, err)
	assert.Equal(t, before, after, "nothing committed")
	hash, err := env.Commit("my note")
	require.NoError(t, err)
	assert.NotEmpty(t, hash)
}
