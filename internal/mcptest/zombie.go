package mcptest

import (
	"errors"
	"os/exec"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/internal/proc"
)

// ZombiePID returns the PID of a child that exited and that the test reaps
// only at its end: a zombie, as a killed writer is until its parent waits
// for it. kill(pid, 0) still succeeds on it; it holds nothing.
func ZombiePID(t testing.TB) int {
	t.Helper()
	cmd := exec.Command("true")
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { cmd.Wait() })
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := proc.StartTime(cmd.Process.Pid)
		if errors.Is(err, proc.ErrNoProcess) {
			return cmd.Process.Pid
		}
		require.NoError(t, err)
		require.True(t, time.Now().Before(deadline), "pid %d never exited", cmd.Process.Pid)
		runtime.Gosched()
	}
}
