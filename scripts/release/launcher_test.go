package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// childEnv makes the test binary act as the binary the launcher runs.
const childEnv = "RELEASE_TEST_LAUNCHED_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		launchedChild()
		return
	}
	code := m.Run()
	if buildTmp != "" {
		_ = os.RemoveAll(buildTmp)
	}
	os.Exit(code)
}

// launchedChild stands in for helios under the launcher: it prints its
// pid and arguments, echoes stdin lines, says "eof" and exits 0 at the end
// of stdin, and says "signal N" and exits 100+N on SIGINT, SIGTERM or
// SIGHUP. Arguments ending in "--exit N" make it exit N at once; "--die"
// makes it die of SIGHUP.
func launchedChild() {
	args := os.Args[1:]
	// Signals are caught before the hello line, after which the test may
	// send them.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	line, _ := json.Marshal(map[string]any{"pid": os.Getpid(), "args": args})
	fmt.Println(string(line))
	if len(args) >= 2 && args[len(args)-2] == "--exit" {
		n, _ := strconv.Atoi(args[len(args)-1])
		os.Exit(n)
	}
	if len(args) == 1 && args[0] == "--die" {
		signal.Reset(syscall.SIGHUP)
		_ = syscall.Kill(os.Getpid(), syscall.SIGHUP)
		time.Sleep(time.Minute) // the signal ends the process first
	}
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				fmt.Println("eof")
				os.Exit(0)
			}
			fmt.Println("echo " + l)
		case s := <-sigs:
			n := int(s.(syscall.Signal))
			fmt.Printf("signal %d\n", n)
			os.Exit(100 + n)
		}
	}
}

// nodeOrFail returns the path of node, and fails the test in CI when there
// is none; elsewhere it skips.
func nodeOrFail(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("node is needed to test the npm launcher and is not on PATH: install Node.js (Debian's nodejs, or the machine's)")
		}
		t.Skip("no node on PATH")
	}
	return node
}

// npmTree lays out node_modules as npm installs the release: the main
// package, and the package of this platform whose helios is a link to
// this test binary. It returns the path of the main package's helios bin.
func npmTree(t *testing.T) (dir, bin string) {
	t.Helper()
	c := repoConfig(t)
	v, err := parseVersion("v1.2.3")
	require.NoError(t, err)
	launcher, err := os.ReadFile(filepath.Join("..", "..", "packaging", "npm", "launcher.js"))
	require.NoError(t, err)
	pkgs, err := npmPackages(c, v, fakeBins(c), launcher, nil, nil)
	require.NoError(t, err)
	dir = filepath.Join(t.TempDir(), "node_modules")
	for name, files := range pkgs {
		for _, f := range files {
			path := filepath.Join(dir, name, filepath.FromSlash(f.Name))
			require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
			mode := os.FileMode(0o644)
			if f.Exec {
				mode = 0o755
			}
			require.NoError(t, os.WriteFile(path, f.Data, mode))
		}
	}
	var here string
	for _, p := range c.Platforms {
		if p.GOOS == runtime.GOOS && p.GOARCH == runtime.GOARCH {
			here = c.npmPackage(p)
		}
	}
	require.NotEmpty(t, here, "the release has no package for %s/%s", runtime.GOOS, runtime.GOARCH)
	self, err := os.Executable()
	require.NoError(t, err)
	helios := filepath.Join(dir, here, "bin", "helios")
	require.NoError(t, os.Remove(helios))
	require.NoError(t, os.Symlink(self, helios))
	return dir, filepath.Join(dir, c.Name, "bin", c.Name+".js")
}

// launched is the launcher running the stand-in child.
type launched struct {
	cmd   *exec.Cmd
	stdin *os.File
	lines chan string // stdout lines of the child, closed at EOF
	pid   int         // the child's pid
}

func launch(t *testing.T, bin string, args ...string) *launched {
	t.Helper()
	return launchVia(t, append([]string{nodeOrFail(t), bin}, args...))
}

// launchVia runs argv, which runs the launcher with the arguments that
// follow its script.
func launchVia(t *testing.T, argv []string) *launched {
	t.Helper()
	var args []string
	for i, a := range argv {
		if strings.HasSuffix(a, ".js") {
			args = argv[i+1:]
		}
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), childEnv+"=1")
	cmd.Stderr = os.Stderr
	stdinR, stdinW, err := os.Pipe()
	require.NoError(t, err)
	outR, outW, err := os.Pipe()
	require.NoError(t, err)
	cmd.Stdin, cmd.Stdout = stdinR, outW
	require.NoError(t, cmd.Start())
	stdinR.Close()
	outW.Close()
	l := &launched{cmd: cmd, stdin: stdinW, lines: make(chan string, 100)}
	t.Cleanup(func() {
		stdinW.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if l.pid > 0 {
			_ = syscall.Kill(l.pid, syscall.SIGKILL)
		}
	})
	go func() {
		defer close(l.lines)
		defer outR.Close()
		sc := bufio.NewScanner(outR)
		for sc.Scan() {
			l.lines <- sc.Text()
		}
	}()
	var hello struct {
		PID  int      `json:"pid"`
		Args []string `json:"args"`
	}
	require.NoError(t, json.Unmarshal([]byte(l.next(t)), &hello))
	l.pid = hello.PID
	assert.Equal(t, append([]string{}, args...), append([]string{}, hello.Args...), "argv passed as is")
	return l
}

// next returns the child's next stdout line, waiting up to 30 s.
func (l *launched) next(t *testing.T) string {
	t.Helper()
	select {
	case line, ok := <-l.lines:
		require.True(t, ok, "the child's stdout ended")
		return line
	case <-time.After(30 * time.Second):
		t.Fatal("no line from the launched child in 30 s")
		return ""
	}
}

// wait waits for the launcher and returns how it ended.
func (l *launched) wait(t *testing.T) syscall.WaitStatus {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- l.cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the launcher did not exit in 30 s")
	}
	return l.cmd.ProcessState.Sys().(syscall.WaitStatus)
}

func TestLauncherPassesArgvStdinAndExitCode(t *testing.T) {
	_, bin := npmTree(t)
	l := launch(t, bin, "--home", "/tmp/a b", "", "ünïcode", "--exit", "7")
	ws := l.wait(t)
	assert.Equal(t, 7, ws.ExitStatus(), "the child's exit status")

	l = launch(t, bin, "--home", "x")
	_, err := l.stdin.WriteString("hello\nworld\n")
	require.NoError(t, err)
	assert.Equal(t, "echo hello", l.next(t))
	assert.Equal(t, "echo world", l.next(t))
	require.NoError(t, l.stdin.Close())
	assert.Equal(t, "eof", l.next(t), "stdin's end reaches the child")
	ws = l.wait(t)
	assert.Equal(t, 0, ws.ExitStatus())
}

func TestLauncherForwardsSignals(t *testing.T) {
	_, bin := npmTree(t)
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP} {
		t.Run(sig.String(), func(t *testing.T) {
			l := launch(t, bin)
			require.NoError(t, l.cmd.Process.Signal(sig))
			assert.Equal(t, fmt.Sprintf("signal %d", sig), l.next(t), "the child got the signal")
			ws := l.wait(t)
			assert.Equal(t, 100+int(sig), ws.ExitStatus(), "and the launcher waited for its exit and took its status")
			waitGoneAll(t, []int{l.pid})
		})
	}
}

func TestLauncherDiesOfTheChildsSignal(t *testing.T) {
	_, bin := npmTree(t)
	l := launch(t, bin, "--die")
	ws := l.wait(t)
	assert.True(t, ws.Signaled(), "the launcher was killed by a signal: %v", ws)
	assert.Equal(t, syscall.SIGHUP, ws.Signal())
}

// TestLauncherKilledLeavesNoOrphan: SIGKILL cannot be forwarded, but the
// child's stdin is a pipe only the launcher held, so the child reads EOF
// and exits.
func TestLauncherKilledLeavesNoOrphan(t *testing.T) {
	_, bin := npmTree(t)
	l := launch(t, bin)
	require.NoError(t, l.cmd.Process.Kill())
	assert.Equal(t, "eof", l.next(t), "the child read EOF when the launcher died")
	waitGoneAll(t, []int{l.pid})
	ws := l.wait(t)
	assert.True(t, ws.Signaled())
}

// TestLauncherOrphanedStopsTheChild: npx runs the launcher under sh -c; a
// SIGTERM to npx kills that shell, which does not pass it on. The launcher
// sees its parent gone while stdin is still open and stops the child.
func TestLauncherOrphanedStopsTheChild(t *testing.T) {
	_, bin := npmTree(t)
	// "; exit" keeps sh from exec'ing node: sh stays node's parent.
	l := launchVia(t, []string{"/bin/sh", "-c", `"$0" "$@"; exit $?`, nodeOrFail(t), bin})
	require.NoError(t, l.cmd.Process.Kill(), "kill the shell")
	assert.Equal(t, fmt.Sprintf("signal %d", syscall.SIGTERM), l.next(t), "the child got SIGTERM when the launcher lost its parent")
	waitGoneAll(t, []int{l.pid})
}

func TestLauncherWithoutThePlatformPackage(t *testing.T) {
	dir, bin := npmTree(t)
	for _, p := range repoConfig(t).Platforms {
		require.NoError(t, os.RemoveAll(filepath.Join(dir, repoConfig(t).npmPackage(p))))
	}
	cmd := exec.Command(nodeOrFail(t), bin, "--version")
	out, err := cmd.CombinedOutput()
	require.Error(t, err)
	assert.Equal(t, 1, cmd.ProcessState.ExitCode())
	assert.Contains(t, string(out), "is not installed")
	assert.Contains(t, string(out), "--omit=optional", "it says how the package goes missing")

	// A platform the release does not have.
	platforms := filepath.Join(dir, repoConfig(t).Name, "lib", "platforms.json")
	require.NoError(t, os.WriteFile(platforms, []byte(`{"plan9-mips": "mcpkeep-helios-plan9-mips"}`), 0o644))
	cmd = exec.Command(nodeOrFail(t), bin, "--version")
	out, err = cmd.CombinedOutput()
	require.Error(t, err)
	assert.Equal(t, 1, cmd.ProcessState.ExitCode())
	assert.Contains(t, string(out), "mcpkeep-helios: no helios binary for "+runtime.GOOS)
	assert.Contains(t, string(out), "this release has plan9-mips")
}
