package proc

import (
	"os"
	"os/exec"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseStat(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("linux /proc format")
	}
	// A command name with spaces and ')' must not shift the fields.
	line := "4242 (evil) name (x)) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10 18446744073709551615"
	got, err := parseStat([]byte(line))
	require.NoError(t, err)
	assert.Equal(t, uint64(987654), got)

	_, err = parseStat([]byte("4242 no parens"))
	assert.Error(t, err)
	_, err = parseStat([]byte("4242 (x) S 1 2"))
	assert.Error(t, err)
}

func TestStartTime(t *testing.T) {
	pid, a, err := Self()
	require.NoError(t, err)
	b, err := StartTime(pid)
	require.NoError(t, err)
	assert.Equal(t, a, b, "stable for the life of the process")
	assert.True(t, Alive(pid, a))
	assert.False(t, Alive(pid, a+1))

	cmd := exec.Command("true")
	require.NoError(t, cmd.Run())
	_, err = StartTime(cmd.Process.Pid)
	assert.ErrorIs(t, err, ErrNoProcess)
	assert.False(t, Running(cmd.Process.Pid))
	assert.False(t, Running(0))
	assert.False(t, Running(-1))
	assert.True(t, Running(os.Getpid()))
}
