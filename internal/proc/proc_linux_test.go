package proc

import (
	"os/exec"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseStat(t *testing.T) {
	const rest = " S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10 18446744073709551615"
	for _, tc := range []struct {
		name, line string
		want       uint64
		state      byte
		ok         bool
	}{
		{name: "plain", line: "4242 (helios)" + rest, want: 987654, state: 'S', ok: true},
		{name: "zombie", line: "4242 (helios) Z" + rest[2:], want: 987654, state: 'Z', ok: true},
		// A command name with spaces and ')' must not shift the fields.
		{name: "spaces and parens", line: "4242 (evil) name (x))" + rest, want: 987654, state: 'S', ok: true},
		{name: "fake fields in name", line: "4242 (a) Z 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22)" + rest, want: 987654, state: 'S', ok: true},
		{name: "no parens", line: "4242 no parens", ok: false},
		{name: "too few fields", line: "4242 (x) S 1 2", ok: false},
		{name: "not a number", line: "4242 (x) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 soon 1000", ok: false},
		{name: "empty", line: "", ok: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, state, err := parseStat([]byte(tc.line))
			if !tc.ok {
				assert.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
			assert.Equal(t, string(tc.state), string(state))
		})
	}
}

// TestStopped: a process stopped by SIGSTOP reads as stopped until
// SIGCONT; one that runs, and no process, do not.
func TestStopped(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	require.NoError(t, cmd.Start())
	pid := cmd.Process.Pid
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	assert.False(t, Stopped(pid), "sleeping, not stopped")
	assert.False(t, Stopped(0))
	assert.False(t, Stopped(-1))

	until := func(want bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for Stopped(pid) != want {
			require.True(t, time.Now().Before(deadline), "pid %d never read as stopped=%t", pid, want)
			runtime.Gosched()
		}
	}
	require.NoError(t, syscall.Kill(pid, syscall.SIGSTOP))
	until(true)
	assert.True(t, Live(pid), "a stopped process is live: it holds its locks")
	require.NoError(t, syscall.Kill(pid, syscall.SIGCONT))
	until(false)
}
