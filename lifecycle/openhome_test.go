package lifecycle_test

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/bootstrap"
	"github.com/mcpkeep/mcpkeep/internal/proc"
	"github.com/mcpkeep/mcpkeep/lifecycle"
	"github.com/mcpkeep/mcpkeep/statefile"
)

// TestOpenHomeRefusesWhatIsNoHome: OpenHome opens an installed home and
// installs none, so a mistyped path (a ~ no shell expanded, a home that
// does not exist, the user's own home directory, a home's parent, a file)
// is refused before anything is created or locked: the error names the
// path and the fix, matches ErrNotHome (and fs.ErrNotExist for a missing
// path), and the directory tree is as it was, byte for byte. CheckHome,
// the same check for operator tools, refuses each with the same error,
// but passes a stamped home without its config repository, which OpenHome
// refuses and a tool such as doctor reports on.
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
	torn := filepath.Join(root, "torn") // stamped, its config repository gone
	_, err = bootstrap.Ensure(t.Context(), bootstrap.Spec{Home: torn, Schema: 1})
	require.NoError(t, err)
	require.NoError(t, os.RemoveAll(filepath.Join(torn, bootstrap.ConfigDir)))

	for _, tc := range []struct {
		name, path string
		fix        string
		missing    bool // also matches fs.ErrNotExist
		checkOK    bool // CheckHome passes it
	}{
		{"empty path", "", "the path is empty", false, false},
		{"tilde", "~/.helios", "only a shell expands", false, false},
		{"tilde alone", "~", "only a shell expands", false, false},
		{"missing", filepath.Join(root, ".heilos"), "check the path; a server creates the home on its first start", true, false},
		{"user's home", user, "no " + bootstrap.VersionFile + " stamp and no config/.git repository", false, false},
		{"home's parent", root, "no " + bootstrap.VersionFile + " stamp and no config/.git repository", false, false},
		{"empty", empty, "check the path; a server creates the home on its first start", false, false},
		{"file", file, "not a directory", false, false},
		{"stamped, no repository", torn, "start the server once to finish it", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := treeOf(t, root)
			checkErr := lifecycle.CheckHome(tc.path)
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
			if tc.checkOK {
				assert.NoError(t, checkErr)
			} else {
				assert.Equal(t, err, checkErr)
			}
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

// TestOpenHomeClearsDeadWriter: OpenHome on a home whose writer was
// SIGKILLed moves the dead writer's state file to backups/ (as a start's
// recovery does) and removes its socket, so status no longer shows a stale
// server; a state file that names a live process (which holds no lock
// here), its socket, and a socket something listens on, are left alone.
func TestOpenHomeClearsDeadWriter(t *testing.T) {
	sleeper := exec.Command("sleep", "60")
	require.NoError(t, sleeper.Start())
	t.Cleanup(func() { sleeper.Process.Kill(); sleeper.Wait() })
	liveStart, err := proc.StartTime(sleeper.Process.Pid)
	require.NoError(t, err)

	for _, tc := range []struct {
		name      string
		pid       int
		start     uint64
		listening bool // something listens on the socket
		cleared   bool // the state file is moved
	}{
		{"dead writer", deadPID(t), 1, false, true},
		{"dead writer, socket in use", deadPID(t), 1, true, true},
		{"live process", sleeper.Process.Pid, liveStart, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home := filepath.Join(t.TempDir(), "home")
			_, err := bootstrap.Ensure(t.Context(), bootstrap.Spec{Home: home, Schema: 1})
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(filepath.Join(home, lifecycle.LockFile), []byte(strconv.Itoa(tc.pid)+"\n"), 0o644))
			sock := filepath.Join(home, "mcp.sock")
			ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
			require.NoError(t, err)
			ln.SetUnlinkOnClose(false)
			if tc.listening {
				t.Cleanup(func() { ln.Close() })
			} else {
				require.NoError(t, ln.Close()) // a dead writer's socket: the file stays, no one listens
			}
			st, err := statefile.New("helios", home)
			require.NoError(t, err)
			st.PID, st.StartTime, st.Socket, st.Token, st.Status = tc.pid, tc.start, sock, "secret", statefile.StatusReady
			statePath := filepath.Join(home, statefile.FileName)
			require.NoError(t, statefile.Write(statePath, &st))

			var log logs
			env, closeEnv, err := lifecycle.OpenHome(home, slog.New(&log))
			require.NoError(t, err)
			require.NoError(t, closeEnv())
			assert.Equal(t, home, env.Home)
			if !tc.cleared {
				assert.FileExists(t, statePath, "a live process's state file is not touched")
				_, err = os.Lstat(sock)
				assert.NoError(t, err, "nor the socket it names")
				return
			}
			assert.NoFileExists(t, statePath, "the dead writer's state file is moved")
			moved, err := filepath.Glob(filepath.Join(home, "backups", "stale-*"+statefile.FileName+"*"))
			require.NoError(t, err)
			assert.Len(t, moved, 1, "to backups/, as a start's recovery moves it")
			_, err = os.Lstat(sock)
			assert.Equal(t, tc.listening, err == nil, "a socket is removed only when no one listens on it: %v", err)
			assert.NotEmpty(t, log.Find(slog.LevelWarn, "recovery"), "it says what it moved")
		})
	}
}

// TestStartRecordsMaxFileSize: each start records Options.MaxFileSize in
// the home's boot record, where HomeMaxFileSize and OpenHome read it, and
// a start at the default records the default again.
func TestStartRecordsMaxFileSize(t *testing.T) {
	opts := options(t)
	assert.Zero(t, lifecycle.HomeMaxFileSize(opts.Home), "no home: the default")
	for _, limit := range []int64{4 << 20, 0, -1} {
		opts.MaxFileSize = limit
		require.NoError(t, run(t, opts).stop(t))
		assert.Equal(t, limit, lifecycle.HomeMaxFileSize(opts.Home))
		env, closeEnv, err := lifecycle.OpenHome(opts.Home, nil)
		require.NoError(t, err)
		assert.Equal(t, limit, env.MaxFileSize, "OpenHome reads with the server's limit")
		require.NoError(t, closeEnv())
	}
}
