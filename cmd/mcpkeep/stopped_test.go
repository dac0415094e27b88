//go:build linux

package main

import (
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/internal/proc"
)

// TestStoppedWriter: a writer stopped with SIGSTOP holds the home and
// answers no one: status shows it stopped, its last health check as not
// live, and lists a problem, exit 1; doctor reports it. Once continued,
// it is a running writer again.
func TestStoppedWriter(t *testing.T) {
	home := installed(t)
	p, _ := live(t, home, filepath.Join(t.TempDir(), "servers.json"))
	pid := p.Pid()
	until := func(stopped bool) {
		t.Helper()
		deadline := time.Now().Add(hangAfter)
		for proc.Stopped(pid) != stopped {
			require.True(t, time.Now().Before(deadline), "pid %d never read as stopped=%t", pid, stopped)
			runtime.Gosched()
		}
	}
	require.NoError(t, syscall.Kill(pid, syscall.SIGSTOP))
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGCONT) })
	until(true)
	problem := kindStoppedServer + " state.json: none (pid " + strconv.Itoa(pid) + " holds the home but is stopped"

	r := mcpkeep(t, "status", "--home", home)
	assert.Equal(t, exitError, r.code, r.stdout)
	for _, want := range []string{
		"lock:      held by pid " + strconv.Itoa(pid) + " (stopped)\n",
		"pid " + strconv.Itoa(pid) + ", ready (stopped: it answers no one until continued)",
		"health:    unknown: the server is stopped (its last check passed, at ",
		"problem:   " + problem,
	} {
		assert.Contains(t, r.stdout, want)
	}
	assert.NotContains(t, r.stdout, "health:    ok")
	got := decode[statusOut](t, mcpkeep(t, "status", "--home", home, "--json"))
	assert.Equal(t, &lockOut{PID: pid, Alive: true, Stopped: true}, got.Lock)
	require.NotNil(t, got.Server)
	assert.True(t, got.Server.Alive)
	assert.True(t, got.Server.Stopped)
	require.Len(t, got.Problems, 1)
	assert.True(t, strings.HasPrefix(got.Problems[0], problem), got.Problems[0])

	r = mcpkeep(t, "doctor", "--home", home)
	assert.Equal(t, exitError, r.code, r.stdout)
	assert.Contains(t, r.stdout, "\n"+problem)
	assert.Contains(t, r.stdout, "continue it (kill -CONT "+strconv.Itoa(pid)+")")

	require.NoError(t, syscall.Kill(pid, syscall.SIGCONT))
	until(false)
	r = mcpkeep(t, "status", "--home", home)
	assert.Equal(t, exitOK, r.code, r.stdout)
	assert.Contains(t, r.stdout, "lock:      held by pid "+strconv.Itoa(pid)+" (running)\n")
	r = mcpkeep(t, "doctor", "--home", home)
	assert.Equal(t, exitOK, r.code, r.stdout)
}
