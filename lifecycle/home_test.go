package lifecycle_test

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/bootstrap"
	"github.com/mcpkeep/mcpkeep/lifecycle"
	"github.com/mcpkeep/mcpkeep/statefile"
)

// TestRunRefusesADirectoryThatIsNotAHome: a directory holding files that
// are not a home's, such as ~/Documents given by mistake, is refused before
// anything is written into it. Everything a new home, a crashed install or
// an installed home may hold is accepted.
func TestRunRefusesADirectoryThatIsNotAHome(t *testing.T) {
	file := func(name string) func(t *testing.T, home string) {
		return func(t *testing.T, home string) {
			path := filepath.Join(home, name)
			require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o700))
			require.NoError(t, os.WriteFile(path, []byte("mine\n"), 0o600))
		}
	}
	dir := func(name string) func(t *testing.T, home string) {
		return func(t *testing.T, home string) { require.NoError(t, os.MkdirAll(filepath.Join(home, name), 0o700)) }
	}
	installed := func(t *testing.T, home string) {
		opts := options(t)
		opts.Home = home
		require.NoError(t, run(t, opts).stop(t))
	}
	tests := []struct {
		name    string
		prepare []func(t *testing.T, home string)
		refused bool
	}{
		{"missing", nil, false},
		{"empty", []func(*testing.T, string){dir("")}, false},
		{"a user's file", []func(*testing.T, string){file("notes.txt")}, true},
		{"a user's file and directories", []func(*testing.T, string){file("notes.txt"), dir("Photos"), dir("config")}, true},
		{"many files", []func(*testing.T, string){file("a"), file("b"), file("c"), file("d"), file("e")}, true},
		{"config files put there before the first start", []func(*testing.T, string){file("config/mine.yaml")}, false},
		{"an install a crash interrupted", []func(*testing.T, string){
			dir("config"), dir("backups"), dir("checkpoints"), file(lifecycle.LockFile), file(lifecycle.FlockFile),
			file(".version.mcpkeep-tmp1234567890123456"), file(".health-42"), file(".lock.20250101T000000.000000000Z.bak"),
		}, false},
		{"an extra directory of the spec", []func(*testing.T, string){dir("cache/deep")}, false},
		{"an installed home with a user's file", []func(*testing.T, string){installed, file("README")}, false},
		{"an installed home that lost its stamp", []func(*testing.T, string){installed, file("README"), func(t *testing.T, home string) {
			require.NoError(t, os.Remove(filepath.Join(home, bootstrap.VersionFile)))
		}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := options(t)
			opts.Spec.Dirs = []string{"cache/deep"}
			for _, prepare := range tt.prepare {
				prepare(t, opts.Home)
			}
			if !tt.refused {
				require.NoError(t, run(t, opts).stop(t))
				assert.FileExists(t, filepath.Join(opts.Home, bootstrap.VersionFile))
				if tt.name == "config files put there before the first start" {
					data, err := os.ReadFile(filepath.Join(opts.Home, "config", "mine.yaml"))
					require.NoError(t, err)
					assert.Equal(t, "mine\n", string(data), "the user's file is kept")
				}
				return
			}
			before, err := os.ReadDir(opts.Home)
			require.NoError(t, err)
			h, err := lifecycle.New(opts)
			require.NoError(t, err)
			err = h.Run(t.Context())
			require.ErrorIs(t, err, lifecycle.ErrNotHome)
			assert.Contains(t, err.Error(), opts.Home, "names the directory")
			assert.Contains(t, err.Error(), "empty or new directory", "says what to do")
			after, err := os.ReadDir(opts.Home)
			require.NoError(t, err)
			assert.Equal(t, names(before), names(after), "nothing written into it")
		})
	}
}

// TestRunRefusesAHomeInsideAHome: a home inside another home (in its
// config/, where that home's server would commit this one's state file and
// token, or anywhere else in it) is refused before anything is made; a
// stray .version or config/.git of the user's above a home is not a home.
func TestRunRefusesAHomeInsideAHome(t *testing.T) {
	outer := options(t)
	require.NoError(t, run(t, outer).stop(t))
	for _, inner := range []string{"config/nested", "config/a/b/c", "backups/x", "sub"} {
		t.Run(inner, func(t *testing.T) {
			opts := options(t)
			opts.Home = filepath.Join(outer.Home, inner)
			h, err := lifecycle.New(opts)
			require.NoError(t, err)
			err = h.Run(t.Context())
			require.ErrorIs(t, err, lifecycle.ErrNotHome)
			assert.Contains(t, err.Error(), opts.Home+" is inside the home "+outer.Home)
			assert.Contains(t, err.Error(), "give a directory outside "+outer.Home)
			assert.NoDirExists(t, opts.Home, "nothing made")
		})
	}
	t.Run("not homes", func(t *testing.T) {
		parent := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(parent, bootstrap.VersionFile), []byte("mine\n"), 0o600))
		require.NoError(t, os.MkdirAll(filepath.Join(parent, "config", ".git"), 0o700))
		opts := options(t)
		opts.Home = filepath.Join(parent, "home")
		require.NoError(t, run(t, opts).stop(t))
		assert.FileExists(t, filepath.Join(opts.Home, bootstrap.VersionFile))
	})
}

func names(entries []os.DirEntry) []string {
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// TestRunGarbageLockInANewHome: a garbage PID file in an otherwise empty
// new home is copied into backups/, and the home is installed as the
// fresh home it is, not resumed as an interrupted install.
func TestRunGarbageLockInANewHome(t *testing.T) {
	opts := options(t)
	garbage, err := os.ReadFile(filepath.Join("..", "testdata", "lock", "garbage"))
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(opts.Home, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(opts.Home, lifecycle.LockFile), garbage, 0o600))
	var log logs
	opts.Logger = slog.New(&log)
	var boot bootstrap.Result
	opts.NewServer = func(env *lifecycle.Env) (*mcp.Server, error) {
		boot = env.Boot
		return newServer(env)
	}
	require.NoError(t, run(t, opts).stop(t))

	assert.True(t, boot.Installed, "a fresh install")
	assert.False(t, boot.Resumed, "not an interrupted one")
	assert.Equal(t, bootstrap.Fresh, boot.Before.State)
	assert.NotEmpty(t, log.Find(slog.LevelInfo, "installed a fresh home"))
	assert.NotEmpty(t, log.Find(slog.LevelWarn, "reclaimed a stale lock"))
	saved, err := filepath.Glob(filepath.Join(opts.Home, "backups", lifecycle.LockFile+".*.bak"))
	require.NoError(t, err)
	require.Len(t, saved, 1, "the garbage is kept in backups/")
	data, err := os.ReadFile(saved[0])
	require.NoError(t, err)
	assert.Equal(t, garbage, data)
	inRoot, err := filepath.Glob(filepath.Join(opts.Home, lifecycle.LockFile+".*.bak"))
	require.NoError(t, err)
	assert.Empty(t, inRoot, "no copy left in the home's top directory")
}

// TestRunClearsADeadServersToken: the state file a killed server left
// behind is kept in backups/ by recovery, without its bearer token.
func TestRunClearsADeadServersToken(t *testing.T) {
	opts := options(t)
	require.NoError(t, run(t, opts).stop(t)) // install
	const token = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	stale, err := statefile.New("notes", opts.Home)
	require.NoError(t, err)
	stale.PID, stale.Status, stale.Token = deadPID(t), statefile.StatusReady, token
	statePath := filepath.Join(opts.Home, statefile.FileName)
	require.NoError(t, statefile.Write(statePath, &stale))

	require.NoError(t, run(t, opts).stop(t))
	saved, err := filepath.Glob(filepath.Join(opts.Home, "backups", "*"+statefile.FileName+"*"))
	require.NoError(t, err)
	require.Len(t, saved, 1, "recovery kept the stale state file")
	data, err := os.ReadFile(saved[0])
	require.NoError(t, err)
	assert.NotContains(t, string(data), token)
	var kept statefile.State
	require.NoError(t, json.Unmarshal(data, &kept))
	assert.Equal(t, stale.PID, kept.PID, "the rest is kept")
	assert.Equal(t, "notes", kept.Name)
}

// TestHomeNothingWritableByOthers: with the usual umask of 022, nothing in
// a home is writable by another user, while its server runs (the state
// file, the socket, the lock) and once it has stopped. The config
// repository's .git/objects and .git/refs were 0777.
func TestHomeNothingWritableByOthers(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	opts := options(t)
	writable := func() []string {
		var found []string
		err := filepath.WalkDir(opts.Home, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			fi, err := d.Info()
			if err != nil {
				return err
			}
			if fi.Mode().Perm()&0o022 != 0 {
				found = append(found, fmt.Sprintf("%s %v", p, fi.Mode()))
			}
			return nil
		})
		require.NoError(t, err)
		return found
	}
	r := run(t, opts)
	assert.Empty(t, writable(), "while the server runs")
	require.NoError(t, r.stop(t))
	assert.Empty(t, writable(), "after it stopped")
}
