package proc

import (
	"errors"
	"os"
	"os/exec"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestStartTime(t *testing.T) {
	pid, a, err := Self()
	require.NoError(t, err)
	b, err := StartTime(pid)
	require.NoError(t, err)
	assert.Equal(t, a, b, "stable for the life of the process")
	assert.True(t, Alive(pid, a))
	assert.False(t, Alive(pid, a+1))
	assert.False(t, Alive(pid, 0), "no start time: cannot be shown to be this process")
	assert.False(t, Alive(1, 0), "not even for a pid that always runs")

	cmd := exec.Command("true")
	require.NoError(t, cmd.Run())
	_, err = StartTime(cmd.Process.Pid)
	assert.ErrorIs(t, err, ErrNoProcess)
	assert.False(t, Running(cmd.Process.Pid))
	assert.False(t, Running(0))
	assert.False(t, Running(-1))
	assert.True(t, Running(os.Getpid()))
	assert.True(t, Live(os.Getpid()))
	assert.False(t, Live(cmd.Process.Pid))
	assert.False(t, Live(0))
}

func TestZombieIsNotAlive(t *testing.T) {
	cmd := exec.Command("true")
	require.NoError(t, cmd.Start())
	pid := cmd.Process.Pid
	t.Cleanup(func() { cmd.Wait() })

	// Until we reap it, the exited child is a zombie: kill(pid, 0) still
	// succeeds, but it is not alive.
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := StartTime(pid)
		if errors.Is(err, ErrNoProcess) {
			break
		}
		require.NoError(t, err)
		require.True(t, time.Now().Before(deadline), "pid %d never read as exited", pid)
		runtime.Gosched()
	}
	assert.True(t, Running(pid), "still a zombie: the pid is not free for reuse yet")
	assert.False(t, Live(pid), "a zombie holds nothing")
	assert.False(t, Alive(pid, 1))
}
