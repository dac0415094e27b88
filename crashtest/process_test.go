package crashtest_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/crashtest"
)

// testprog is the path of crashtest/internal/testprog, built once by
// TestMain in binDir.
var testprog, binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "crashtest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	testprog, err = crashtest.Build(context.Background(), "./internal/testprog", dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func TestBuild(t *testing.T) {
	dir := t.TempDir()
	p1, err := crashtest.Build(t.Context(), "./internal/testprog", dir)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(dir, "testprog"), p1)
	assert.FileExists(t, p1)
	p2, err := crashtest.Build(t.Context(), "./internal/testprog", dir)
	require.NoError(t, err)
	assert.Equal(t, p1, p2, "a second Build reuses the binary")

	_, err = crashtest.Build(t.Context(), "./internal/nosuchprog", dir)
	var be *crashtest.BuildError
	require.ErrorAs(t, err, &be)
	assert.Equal(t, "./internal/nosuchprog", be.Package)
	assert.NotEmpty(t, be.Output, "the go command's message is kept")

	_, err = crashtest.Build(t.Context(), "", dir)
	assert.Error(t, err)

	// go build -o writes a package that is not main as an archive.
	_, err = crashtest.Build(t.Context(), ".", dir)
	require.ErrorAs(t, err, &be)
	assert.EqualError(t, err, "crashtest: go build .: github.com/mcpkeep/mcpkeep/crashtest is package crashtest, not a main package: "+
		"Build compiles a package main with a func main")
	_, err = crashtest.Build(t.Context(), "github.com/mcpkeep/mcpkeep/crashtest", dir)
	require.ErrorAs(t, err, &be)
	assert.ErrorContains(t, err, "go build github.com/mcpkeep/mcpkeep/crashtest: it is package crashtest, not a main package")
	_, err = crashtest.Build(t.Context(), "./internal/...", dir)
	require.ErrorAs(t, err, &be)
	assert.ErrorContains(t, err, "it matches 2 packages: Build compiles one main package")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 1, "only testprog was built")
}

// TestBuildNamesLikeGoBuild: the binary of "." is named after the
// package's import path, as go build names it, not after ".".
func TestBuildNamesLikeGoBuild(t *testing.T) {
	dir := t.TempDir()
	t.Chdir("internal/testprog")
	p, err := crashtest.Build(t.Context(), ".", dir)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(dir, "testprog"), p)
	assert.FileExists(t, p)
}

// TestProcessOutcomes tells a clean exit, a kill, a failpoint kill and a
// failing exit apart.
func TestProcessOutcomes(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		failpoints string
		act        func(t *testing.T, p *crashtest.Process)
		killed     bool
		code       int    // exit status, -1 for a signal
		stderr     string // expected in the stderr tail
	}{
		{
			name: "clean exit at end of input",
			act: func(t *testing.T, p *crashtest.Process) {
				_, err := fmt.Fprintln(p.Stdin(), "one")
				require.NoError(t, err)
				assert.Equal(t, "ok one", readLine(t, p))
				require.NoError(t, p.Stdin().Close())
			},
		},
		{
			name: "Kill",
			act: func(t *testing.T, p *crashtest.Process) {
				_, err := fmt.Fprintln(p.Stdin(), "one")
				require.NoError(t, err)
				assert.Equal(t, "ok one", readLine(t, p))
				require.NoError(t, p.Kill())
				assert.True(t, p.Exited(), "Kill reaps")
				require.NoError(t, p.Kill(), "a second Kill is a no-op")
			},
			killed: true, code: -1,
		},
		{
			name:       "failpoint kill",
			failpoints: "atomicfile.before-rename=kill",
			act: func(t *testing.T, p *crashtest.Process) {
				_, err := fmt.Fprintln(p.Stdin(), "one")
				require.NoError(t, err)
				_, err = bufio.NewReader(p.Stdout()).ReadString('\n')
				require.Error(t, err, "killed before acknowledging")
			},
			killed: true, code: -1,
		},
		{
			name:   "failing exit",
			args:   []string{"-fail"},
			code:   3,
			stderr: "failing on purpose",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "lines")
			p, err := crashtest.Start(t.Context(), crashtest.Cmd{
				Path:       testprog,
				Args:       append([]string{"-file", file}, tt.args...),
				Failpoints: tt.failpoints,
			})
			require.NoError(t, err)
			assert.Positive(t, p.Pid())
			if tt.act != nil {
				tt.act(t, p)
			}
			err = p.Wait()
			assert.Equal(t, tt.killed, p.Killed())
			assert.Equal(t, tt.code, p.ExitCode())
			assert.Contains(t, p.Stderr(), tt.stderr)
			if tt.code == 0 {
				require.NoError(t, err)
				return
			}
			var ee *crashtest.ExitError
			require.ErrorAs(t, err, &ee)
			assert.Equal(t, tt.code, ee.Code)
			assert.Equal(t, testprog, ee.Path)
			if tt.killed {
				require.ErrorIs(t, err, crashtest.ErrKilled)
				assert.Equal(t, syscall.SIGKILL, ee.Signal)
			} else {
				assert.NotErrorIs(t, err, crashtest.ErrKilled)
				assert.Contains(t, ee.Stderr, tt.stderr)
			}
			assert.Equal(t, err, p.Wait(), "Wait returns the same result again")
		})
	}
}

func TestStartContextEndKills(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	p, err := crashtest.Start(ctx, crashtest.Cmd{Path: testprog, Args: []string{"-file", filepath.Join(t.TempDir(), "f")}})
	require.NoError(t, err)
	cancel()
	require.ErrorIs(t, p.Wait(), crashtest.ErrKilled)
	assert.True(t, p.Killed())
}

func TestStartAttachedStreams(t *testing.T) {
	var out, errOut strings.Builder
	p, err := crashtest.Start(t.Context(), crashtest.Cmd{
		Path:   testprog,
		Args:   []string{"-file", filepath.Join(t.TempDir(), "f")},
		Stdin:  strings.NewReader("a\nb\n"),
		Stdout: &out,
		Stderr: &errOut,
		Env:    []string{"MCPKEEP_FAILPOINTS=atomicfile.before-write=kill"}, // Cmd.Failpoints wins
	})
	require.NoError(t, err)
	assert.Nil(t, p.Stdin())
	assert.Nil(t, p.Stdout())
	require.NoError(t, p.Wait())
	assert.Equal(t, "ok a\nok b\n", out.String())
	assert.Empty(t, errOut.String())
}

func TestStartRejects(t *testing.T) {
	tests := []struct {
		name string
		cmd  crashtest.Cmd
	}{
		{"no path", crashtest.Cmd{}},
		{"unknown failpoint", crashtest.Cmd{Path: testprog, Failpoints: "nosuch.point=kill"}},
		{"unknown action", crashtest.Cmd{Path: testprog, Failpoints: "atomicfile.before-write=explode"}},
		{"missing binary", crashtest.Cmd{Path: filepath.Join(t.TempDir(), "absent")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := crashtest.Start(t.Context(), tt.cmd)
			assert.Error(t, err)
			assert.Nil(t, p)
		})
	}
}

func readLine(t *testing.T, p *crashtest.Process) string {
	t.Helper()
	line, err := bufio.NewReader(p.Stdout()).ReadString('\n')
	require.NoError(t, err)
	return strings.TrimSuffix(line, "\n")
}
