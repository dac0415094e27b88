package lifecycle_test

import (
	"bufio"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/lifecycle"
)

type child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
}

func startChild(t *testing.T, exe, home string, cred *syscall.Credential) *child {
	t.Helper()
	cmd := exec.Command(exe, home)
	cmd.Stderr = os.Stderr
	if cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	c := &child{cmd: cmd, stdin: stdin, out: bufio.NewReader(stdout)}
	t.Cleanup(func() { c.stdin.Close(); c.cmd.Process.Kill(); c.cmd.Wait() })
	return c
}

func (c *child) line(t *testing.T) string {
	t.Helper()
	s, err := c.out.ReadString('\n')
	require.NoError(t, err)
	return strings.TrimSpace(s)
}

func (c *child) release() {
	c.stdin.Close()
	c.cmd.Wait()
}

func TestTwoProcessesOneHolder(t *testing.T) {
	home := t.TempDir()
	a := startChild(t, lockChild, home, nil)
	require.Equal(t, "won", a.line(t))

	_, err := lifecycle.TryLock(home)
	var le *lifecycle.LockedError
	require.ErrorAs(t, err, &le)
	require.ErrorIs(t, err, lifecycle.ErrLocked)
	assert.Equal(t, a.cmd.Process.Pid, le.PID)
	assert.Contains(t, le.Error(), strconv.Itoa(a.cmd.Process.Pid))
	assert.NotContains(t, le.Error(), "another home", "what to do is the caller's to say")

	b := startChild(t, lockChild, home, nil)
	assert.Equal(t, fmt.Sprintf("locked %d", a.cmd.Process.Pid), b.line(t))

	// SIGKILL the holder: the kernel drops its flock, the next try wins.
	require.NoError(t, a.cmd.Process.Kill())
	a.cmd.Wait()
	l, err := lifecycle.TryLock(home)
	require.NoError(t, err)
	defer l.Unlock()
	assert.NotEmpty(t, l.Reclaimed(), "the dead holder's PID file was reclaimed")
	assert.NoError(t, l.Check())
}

func TestStaleLockFilesAreReclaimed(t *testing.T) {
	cases := map[string][]byte{
		"parent pid (alive, not the holder)": []byte(strconv.Itoa(os.Getppid()) + "\n"),
		"dead pid":                           []byte(strconv.Itoa(deadPID(t)) + "\n"),
	}
	for _, name := range []string{"empty", "garbage", "nul-bytes", "negative"} {
		b, err := os.ReadFile(filepath.Join("..", "testdata", "lock", name))
		require.NoError(t, err)
		cases[name] = b
	}
	for name, content := range cases {
		t.Run(name, func(t *testing.T) {
			home := t.TempDir() // no backups/ yet: TryLock makes it
			require.NoError(t, os.WriteFile(filepath.Join(home, lifecycle.LockFile), content, 0o644))
			l, err := lifecycle.TryLock(home)
			require.NoError(t, err)
			defer l.Unlock()
			require.Len(t, l.Reclaimed(), 1)
			got, err := os.ReadFile(filepath.Join(home, lifecycle.LockFile))
			require.NoError(t, err)
			assert.Equal(t, fmt.Sprintf("%d\n", os.Getpid()), string(got))
			if _, err := lifecycle.ParseLockContent(content); err != nil {
				saved, _ := filepath.Glob(filepath.Join(home, "backups", lifecycle.LockFile+".*"))
				require.Len(t, saved, 1, "garbage is copied aside, not just deleted")
				b, err := os.ReadFile(saved[0])
				require.NoError(t, err)
				assert.Equal(t, content, b)
				fi, err := os.Stat(filepath.Join(home, "backups"))
				require.NoError(t, err)
				assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm())
			}
			inRoot, _ := filepath.Glob(filepath.Join(home, lifecycle.LockFile+".*.bak"))
			assert.Empty(t, inRoot, "no copy in the home's top directory")
		})
	}
}

func deadPID(t *testing.T) int {
	cmd := exec.Command("true")
	require.NoError(t, cmd.Run())
	return cmd.Process.Pid
}

func race(t *testing.T, exe, home string, n int) (winners int, lines []string) {
	t.Helper()
	children := make([]*child, n)
	for i := range children {
		children[i] = startChild(t, exe, home, nil)
	}
	for _, c := range children {
		l := c.line(t)
		lines = append(lines, l)
		if l == "won" {
			winners++
		}
	}
	for _, c := range children {
		c.release()
	}
	return winners, lines
}

func TestRaceHundredProcesses(t *testing.T) {
	rounds := 20
	if testing.Short() {
		rounds = 3
	}
	for _, stale := range []bool{false, true} {
		t.Run(fmt.Sprintf("stale=%t", stale), func(t *testing.T) {
			for round := range rounds {
				home := t.TempDir()
				if stale {
					require.NoError(t, os.WriteFile(filepath.Join(home, lifecycle.LockFile), []byte(strconv.Itoa(deadPID(t))+"\n"), 0o644))
				}
				winners, lines := race(t, lockChild, home, 100)
				require.Equal(t, 1, winners, "round %d: %v", round, lines)
				for _, l := range lines {
					assert.True(t, l == "won" || strings.HasPrefix(l, "locked "), "unexpected child output %q", l)
				}
			}
		})
	}
}

func TestOtherUserCannotTakeRootsLock(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to run a child as nobody")
	}
	dir, err := os.MkdirTemp("", "lifecycle-nobody-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o777))
	home := filepath.Join(dir, "home")
	require.NoError(t, os.Mkdir(home, 0o777))
	require.NoError(t, os.Chmod(home, 0o777))

	l, err := lifecycle.TryLock(home)
	require.NoError(t, err)
	defer l.Unlock()

	exe := filepath.Join(dir, "lockchild")
	data, err := os.ReadFile(lockChild)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(exe, data, 0o755))
	c := startChild(t, exe, home, &syscall.Credential{Uid: 65534, Gid: 65534})
	// nobody cannot open root's 0600 lock files: it gets an error that
	// names the file, or (if it could read the PID file) ErrLocked.
	line := c.line(t)
	if !strings.HasPrefix(line, "locked ") {
		assert.Contains(t, line, lifecycle.FlockFile)
		assert.Contains(t, line, "not writable by this user")
	}
	assert.NotEqual(t, "won", line)
	assert.NoError(t, l.Check(), "root still holds its lock")
}

func TestUnlock(t *testing.T) {
	home := t.TempDir()
	l, err := lifecycle.TryLock(home)
	require.NoError(t, err)
	require.NoError(t, l.Unlock())
	require.NoError(t, l.Unlock(), "idempotent")
	_, err = os.Stat(filepath.Join(home, lifecycle.LockFile))
	assert.ErrorIs(t, err, os.ErrNotExist)
	_, err = os.Stat(filepath.Join(home, lifecycle.FlockFile))
	assert.NoError(t, err, "the flock file is never removed")

	// A PID file that names another process is not removed by our Unlock.
	l, err = lifecycle.TryLock(home)
	require.NoError(t, err)
	path := filepath.Join(home, lifecycle.LockFile)
	require.NoError(t, os.WriteFile(path, []byte("1\n"), 0o644))
	assert.Error(t, l.Check(), "the PID file no longer names us")
	require.NoError(t, l.Unlock())
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "1\n", string(b))
}

// TestUnlockNilOrZero: Unlock of a lock never taken does nothing, so a
// deferred Unlock after a failed TryLock is safe.
func TestUnlockNilOrZero(t *testing.T) {
	var nilLock *lifecycle.HomeLock
	assert.NoError(t, nilLock.Unlock())
	zero := &lifecycle.HomeLock{}
	assert.NoError(t, zero.Unlock())
	assert.NoError(t, zero.Unlock(), "idempotent")
}

// TestLockEmptyHome: an empty home is an error, not the current directory.
func TestLockEmptyHome(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	l, err := lifecycle.TryLock("")
	require.Error(t, err)
	assert.Nil(t, l)
	assert.Contains(t, err.Error(), "home is empty")
	_, err = lifecycle.Lock(t.Context(), "")
	require.Error(t, err)
	assert.NotErrorIs(t, err, lifecycle.ErrLocked)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, entries, "no lock files in the current directory")
}

func TestCheckRewritesDeletedPIDFile(t *testing.T) {
	home := t.TempDir()
	l, err := lifecycle.TryLock(home)
	require.NoError(t, err)
	defer l.Unlock()
	require.NoError(t, os.Remove(filepath.Join(home, lifecycle.LockFile)))
	assert.Error(t, l.Check(), "reported")
	assert.NoError(t, l.Check(), "and repaired")
}

func TestLockWaits(t *testing.T) {
	home := t.TempDir()
	a := startChild(t, lockChild, home, nil)
	require.Equal(t, "won", a.line(t))
	done := make(chan error, 1)
	go func() {
		l, err := lifecycle.Lock(t.Context(), home)
		if err == nil {
			l.Unlock()
		}
		done <- err
	}()
	a.release()
	require.NoError(t, <-done)
}

func TestLockContextEnds(t *testing.T) {
	home := t.TempDir()
	l, err := lifecycle.TryLock(home)
	require.NoError(t, err)
	defer l.Unlock()
	ctx, cancel := contextWithCancel(t)
	cancel()
	_, err = lifecycle.Lock(ctx, home)
	require.ErrorIs(t, err, lifecycle.ErrLocked)
}

func FuzzLockContent(f *testing.F) {
	for _, s := range []string{"4242\n", "", "garbage", "-1", "0", "99999999999999999999", " 12 \n", "\x00"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		pid, err := lifecycle.ParseLockContent(data)
		if err == nil {
			assert.Positive(t, pid)
		}
	})
}

// TestLockRefusesAnotherUsersHome: root launching a user's server on the
// user's home (sudo npx ..., a root container on the host user's volume)
// takes no lock and writes nothing there: every file it wrote would be
// root's, and the owner's next start would fail on them. The error names
// the owner.
func TestLockRefusesAnotherUsersHome(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("giving a home to another user needs root")
	}
	const nobody = 65534
	home := filepath.Join(t.TempDir(), "home")
	require.NoError(t, os.Mkdir(home, 0o700))
	require.NoError(t, os.Chown(home, nobody, nobody))
	// Not installed yet, or installed (by nobody, or with its stamp then
	// lost, or by root in a directory of nobody's): refused alike.
	_, err := lifecycle.TryLock(home)
	require.ErrorIs(t, err, fs.ErrPermission)
	stamp := filepath.Join(home, ".version")
	require.NoError(t, os.WriteFile(stamp, []byte(`{"schema":1}`), 0o600))
	require.NoError(t, os.Chown(stamp, nobody, nobody))
	require.NoError(t, os.Chown(home, 0, 0))
	_, err = lifecycle.TryLock(home)
	require.ErrorIs(t, err, fs.ErrPermission, "a root-owned directory holding nobody's stamp")
	require.NoError(t, os.Chown(home, nobody, nobody))

	_, err = lifecycle.TryLock(home)
	require.ErrorIs(t, err, fs.ErrPermission)
	assert.Contains(t, err.Error(), "belongs to nobody (uid 65534)")
	assert.Contains(t, err.Error(), "run the server as the home's owner")
	entries, err := os.ReadDir(home)
	require.NoError(t, err)
	assert.Len(t, entries, 1, "nothing written beside the stamp")

	opts := options(t)
	opts.Home = home
	opts.Stdin, opts.Stdout = strings.NewReader(""), io.Discard
	h, err := lifecycle.New(opts)
	require.NoError(t, err)
	err = h.Run(t.Context())
	require.ErrorIs(t, err, fs.ErrPermission)
	assert.Contains(t, err.Error(), "belongs to nobody (uid 65534)")
	entries, err = os.ReadDir(home)
	require.NoError(t, err)
	assert.Len(t, entries, 1, "Run wrote nothing either")
}
