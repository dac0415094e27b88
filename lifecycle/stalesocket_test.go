package lifecycle_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/bootstrap"
	"github.com/mcpkeep/mcpkeep/internal/mcptest"
	"github.com/mcpkeep/mcpkeep/internal/proc"
	"github.com/mcpkeep/mcpkeep/lifecycle"
	"github.com/mcpkeep/mcpkeep/lifecycle/internal/attach"
	"github.com/mcpkeep/mcpkeep/statefile"
)

// TestStaleSockets: the sockets a writer that is not running left, in the
// home and at the path its state file names, are found without the lock
// and removed with it; a socket something listens on is neither, and while
// the PID lock file or the state file names a running process nothing is
// found or removed.
func TestStaleSockets(t *testing.T) {
	sleeper := exec.Command("sleep", "60")
	require.NoError(t, sleeper.Start())
	t.Cleanup(func() { sleeper.Process.Kill(); sleeper.Wait() })
	liveStart, err := proc.StartTime(sleeper.Process.Pid)
	require.NoError(t, err)
	dead := deadPID(t)
	zombie := mcptest.ZombiePID(t)

	for _, tc := range []struct {
		name      string
		lockPID   int    // in the PID lock file; 0: none
		statePID  int    // in the state file, which names the socket outside the home; 0: none
		start     uint64 // the state file's process start time
		listening bool   // something listens on the home's socket
		want      []string
	}{
		{"dead writer", dead, dead, 1, false, []string{"inside", "outside"}},
		{"a writer not reaped yet", zombie, zombie, 1, false, []string{"inside", "outside"}},
		{"no lock file, no state file", 0, 0, 0, false, []string{"inside"}},
		{"a socket in use", dead, dead, 1, true, []string{"outside"}},
		{"a live pid in the lock file", sleeper.Process.Pid, dead, 1, false, nil},
		{"a live server in the state file", dead, sleeper.Process.Pid, liveStart, false, nil},
		// After a reboot, say: the state file's start time tells another
		// process under the dead writer's pid, as status tells it.
		{"a pid reused since", sleeper.Process.Pid, sleeper.Process.Pid, liveStart + 1, false, []string{"inside", "outside"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home := t.TempDir()
			paths := map[string]string{"inside": filepath.Join(home, "mcp.sock"), "outside": filepath.Join(t.TempDir(), "0123456789abcdef.sock")}
			mcptest.DeadSocket(t, paths["inside"], tc.listening)
			mcptest.DeadSocket(t, paths["outside"], false)
			if tc.lockPID != 0 {
				require.NoError(t, os.WriteFile(filepath.Join(home, lifecycle.LockFile), []byte(strconv.Itoa(tc.lockPID)+"\n"), 0o600))
			}
			if tc.statePID != 0 {
				st, err := statefile.New("helios", home)
				require.NoError(t, err)
				st.PID, st.StartTime, st.Socket = tc.statePID, tc.start, paths["outside"]
				require.NoError(t, statefile.Write(filepath.Join(home, statefile.FileName), &st))
			}
			var want []string
			for _, w := range tc.want {
				want = append(want, paths[w])
			}

			assert.Equal(t, want, lifecycle.StaleSockets(home))
			for _, p := range paths {
				_, err := os.Lstat(p)
				assert.NoError(t, err, "StaleSockets only looks")
			}

			if tc.lockPID == sleeper.Process.Pid {
				return // the flock is free: TryLock would take the home from the live pid's file
			}
			lock, err := lifecycle.TryLock(home)
			require.NoError(t, err)
			removed, err := lock.RemoveStaleSockets()
			require.NoError(t, err)
			require.NoError(t, lock.Unlock())
			assert.Equal(t, want, removed)
			for _, p := range paths {
				_, err := os.Lstat(p)
				assert.Equal(t, !slices.Contains(want, p), err == nil, "%s is removed only if stale: %v", p, err)
			}
		})
	}
}

// TestStaleTempSockets: the temporary sockets a writer killed between
// binding its socket and renaming it into place left, beside the home's
// socket or the one its state file names, are found without the lock and
// removed with it, by RemoveStaleSockets and by OpenHome's clean-up of a
// dead writer alike, also with no socket at the path; one something
// listens on, or anything there that is not a socket, is neither, and
// while the PID lock file names a running process nothing is found.
func TestStaleTempSockets(t *testing.T) {
	const (
		sock    = "home/mcp.sock"
		temp    = "home/.mcp.sock.0a1b2c3d"
		temp2   = "home/.mcp.sock.ffffffff"
		out     = "outside/0123456789abcdef.sock" // the state file names it
		outTemp = "outside/.0123456789abcdef.sock.0a1b2c3d"
	)
	const (
		dead = iota
		listening
		file
	)
	require.True(t, attach.IsSocketName(filepath.Base(temp)), "a name attach binds the home's socket under")
	root := t.TempDir() // the subtests' own would make the paths too long for a socket address
	for i, tc := range []struct {
		name  string
		live  bool           // the PID lock file names a running process, else a dead one
		files map[string]int // what is where: a dead or a listening socket, or a file
		want  []string
	}{
		{"no socket at the path", false, map[string]int{temp: dead}, []string{temp}},
		{"outside, no socket at the path", false, map[string]int{outTemp: dead}, []string{outTemp}},
		{"beside stale sockets", false, map[string]int{sock: dead, temp: dead, temp2: dead, out: dead, outTemp: dead},
			[]string{sock, temp, temp2, out, outTemp}},
		{"one in use", false, map[string]int{sock: dead, temp: listening, temp2: dead}, []string{sock, temp2}},
		{"not a socket", false, map[string]int{sock: dead, temp: file}, []string{sock}},
		{"a live pid in the lock file", true, map[string]int{sock: dead, temp: dead}, nil},
	} {
		for _, remover := range []string{"RemoveStaleSockets", "OpenHome"} {
			t.Run(tc.name+"/"+remover, func(t *testing.T) {
				dir := filepath.Join(root, strconv.Itoa(i)+remover[:1])
				if remover == "RemoveStaleSockets" {
					dir += "[" // a home's path may hold a pattern's metacharacters
				}
				home := filepath.Join(dir, "home")
				for _, d := range []string{home, filepath.Join(dir, "outside")} {
					require.NoError(t, os.MkdirAll(d, 0o700))
				}
				if remover == "OpenHome" {
					_, err := bootstrap.Ensure(t.Context(), bootstrap.Spec{Home: home, Schema: 1})
					require.NoError(t, err)
				}
				lockPID := deadPID(t)
				if tc.live {
					lockPID = os.Getpid()
				}
				require.NoError(t, os.WriteFile(filepath.Join(home, lifecycle.LockFile), []byte(strconv.Itoa(lockPID)+"\n"), 0o600))
				st, err := statefile.New("helios", home)
				require.NoError(t, err)
				st.PID, st.StartTime, st.Socket = deadPID(t), 1, filepath.Join(dir, out)
				require.NoError(t, statefile.Write(filepath.Join(home, statefile.FileName), &st))
				for name, what := range tc.files {
					p := filepath.Join(dir, name)
					if what == file {
						require.NoError(t, os.WriteFile(p, nil, 0o600))
					} else {
						mcptest.DeadSocket(t, p, what == listening)
					}
				}
				var want []string
				for _, w := range tc.want {
					want = append(want, filepath.Join(dir, w))
				}

				assert.Equal(t, want, lifecycle.StaleSockets(home))
				for name := range tc.files {
					_, err := os.Lstat(filepath.Join(dir, name))
					assert.NoError(t, err, "StaleSockets only looks")
				}

				if tc.live {
					return // the flock is free: TryLock would take the home from the live pid's file
				}
				if remover == "OpenHome" {
					_, closeEnv, err := lifecycle.OpenHome(home, nil)
					require.NoError(t, err)
					require.NoError(t, closeEnv())
				} else {
					lock, err := lifecycle.TryLock(home)
					require.NoError(t, err)
					removed, err := lock.RemoveStaleSockets()
					require.NoError(t, err)
					require.NoError(t, lock.Unlock())
					assert.Equal(t, want, removed)
				}
				for name := range tc.files {
					p := filepath.Join(dir, name)
					_, err := os.Lstat(p)
					assert.Equal(t, !slices.Contains(want, p), err == nil, "%s is removed only if stale: %v", name, err)
				}
			})
		}
	}
}
