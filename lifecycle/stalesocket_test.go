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

	"github.com/mcpkeep/mcpkeep/internal/mcptest"
	"github.com/mcpkeep/mcpkeep/internal/proc"
	"github.com/mcpkeep/mcpkeep/lifecycle"
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
