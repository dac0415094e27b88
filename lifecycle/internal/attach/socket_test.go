package attach_test

import (
	"bufio"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/lifecycle/internal/attach"
)

func TestPath(t *testing.T) {
	home := t.TempDir()
	assert.Equal(t, filepath.Join(home, attach.SocketName), attach.Path(home))

	runtime := t.TempDir()
	t.Setenv(attach.RuntimeDirEnv, runtime)
	long := filepath.Join(home, strings.Repeat("d", 120))
	p := attach.Path(long)
	assert.Equal(t, filepath.Join(runtime, "mcpkeep-"+itoa(os.Getuid())), filepath.Dir(p), "a long home's socket is in the runtime directory")
	assert.Equal(t, p, attach.Path(long), "the same path every time")
	assert.NotEqual(t, p, attach.Path(long+"x"), "another home, another socket")
	assert.Less(t, len(p), 104)

	assert.True(t, attach.IsSocketName("mcp.sock"))
	assert.True(t, attach.IsSocketName(".mcp.sock.0a1b2c3d"))
	assert.False(t, attach.IsSocketName("mcp.sockets"))
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestListenReplacesStaleSocket: a socket file left by a writer that was
// killed is replaced; the new socket is 0600, and no temporary is left.
func TestListenReplacesStaleSocket(t *testing.T) {
	home := t.TempDir()
	path := attach.Path(home)
	stale, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	require.NoError(t, err)
	stale.SetUnlinkOnClose(false)
	stale.Close() // the file stays, nobody listens: a killed writer's
	_, err = attach.Dial(t.Context(), path, attach.Hello{})
	require.ErrorIs(t, err, attach.ErrNoWriter, "a stale socket is not a writer")
	require.NoError(t, os.WriteFile(filepath.Join(home, ".mcp.sock.deadbeef"), nil, 0o600)) // a temporary of a writer killed before its rename

	ln, err := attach.Listen(path)
	require.NoError(t, err)
	fi, err := os.Lstat(path)
	require.NoError(t, err)
	assert.Equal(t, os.ModeSocket, fi.Mode().Type())
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	entries, err := os.ReadDir(home)
	require.NoError(t, err)
	require.Len(t, entries, 1, "only the socket: %v", entries)

	require.NoError(t, attach.Unlisten(ln, path))
	assert.NoFileExists(t, path)
	_, err = attach.Dial(t.Context(), path, attach.Hello{})
	require.ErrorIs(t, err, attach.ErrNoWriter, "a missing socket is no writer")
}

// TestListenRefusesAnOpenDirectory: a socket directory outside the home
// that others may enter, or that is another user's, is refused.
func TestListenRefusesAnOpenDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "mcpkeep-x")
	require.NoError(t, os.Mkdir(dir, 0o777))
	require.NoError(t, os.Chmod(dir, 0o777))
	_, err := attach.Listen(filepath.Join(dir, "a.sock"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "chmod 700 "+dir)

	require.NoError(t, os.Chmod(dir, 0o755))
	ln, err := attach.Listen(filepath.Join(dir, "a.sock"))
	require.NoError(t, err)
	require.NoError(t, attach.Unlisten(ln, filepath.Join(dir, "a.sock")))

	if os.Getuid() == 0 {
		require.NoError(t, os.Chown(dir, 65534, 65534))
		_, err = attach.Listen(filepath.Join(dir, "a.sock"))
		require.Error(t, err)
		assert.Contains(t, err.Error(), "belongs to uid 65534")
	}
}

// TestAnotherUserIsRefused: a process of another user that reaches the
// socket (here one made reachable on purpose) is refused by the writer,
// which says why, and never gets a session; and the forwarder side refuses
// a writer of another user.
func TestAnotherUserIsRefused(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to run a child as nobody")
	}
	dir, err := os.MkdirTemp("", "attach-nobody-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "mcp.sock")
	w := startWriter(t, path, newServer("writer", nil))
	// The mistakes that would let another user reach it.
	require.NoError(t, os.Chmod(dir, 0o755))
	require.NoError(t, os.Chmod(path, 0o666))

	cmd := exec.Command(exeForNobody(t), "-test.run=^TestHelperDialAsNobody$")
	cmd.Env = append(os.Environ(), "ATTACH_HELPER_SOCKET="+path)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	assert.Contains(t, string(out), "dial: attach: the process listening at "+path+" (pid "+itoa(os.Getpid())+") runs as uid 0, not as this user (uid 65534)")
	assert.Contains(t, string(out), `writer: {"attach":1,"pid":`+itoa(os.Getpid())+`,"refused":"it runs as uid 65534, the writer as uid 0: only the writer's user may attach"}`)
	assert.Empty(t, w.l.Sessions())
}

// TestHelperDialAsNobody dials the socket as another user: through Dial,
// which checks the writer, and by hand, to see what the writer says (at
// once: it does not wait for a hello it would refuse anyway).
func TestHelperDialAsNobody(t *testing.T) {
	path := os.Getenv("ATTACH_HELPER_SOCKET")
	if path == "" {
		return
	}
	_, err := attach.Dial(context.Background(), path, attach.Hello{PID: os.Getpid()})
	require.Error(t, err)
	os.Stdout.WriteString("dial: " + err.Error() + "\n")
	c, err := net.Dial("unix", path)
	require.NoError(t, err)
	defer c.Close()
	line, err := bufio.NewReader(c).ReadString('\n')
	require.NoError(t, err)
	os.Stdout.WriteString("writer: " + line)
}

// exeForNobody copies the test binary where nobody may run it.
func exeForNobody(t *testing.T) string {
	dir, err := os.MkdirTemp("", "attach-exe-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o755))
	data, err := os.ReadFile(os.Args[0])
	require.NoError(t, err)
	exe := filepath.Join(dir, "test.exe")
	require.NoError(t, os.WriteFile(exe, data, 0o755))
	return exe
}

// TestHelloGarbage: a connection that sends no hello gets no session, and
// the writer goes on serving.
func TestHelloGarbage(t *testing.T) {
	path := attach.Path(t.TempDir())
	w := startWriter(t, path, newServer("writer", nil))
	c, err := net.Dial("unix", path)
	require.NoError(t, err)
	_, err = c.Write([]byte(`{"jsonrpc":"2.0","id":1,"method":"initialize"}` + "\n"))
	require.NoError(t, err)
	_, err = bufio.NewReader(c).ReadString('\n')
	require.Error(t, err, "closed without an answer")
	c.Close()
	assert.Empty(t, w.l.Sessions())

	cs := attachClient(t, path, nil)
	_, err = cs.cs.ListTools(t.Context(), nil)
	require.NoError(t, err)
}

// TestAnotherServerIsRefused: the writer refuses, at the hello, a process
// whose hello names another server, saying why, and serves it no session;
// one that names the same server, or none (an older mcpkeep), is taken.
func TestAnotherServerIsRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mcp.sock")
	w := startWriter(t, path, newServer("writer", nil)) // its hello names "test"
	_, err := attach.Dial(t.Context(), path, attach.Hello{PID: os.Getpid(), Name: "other"})
	var re *attach.RefusedError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, os.Getpid(), re.PID)
	assert.Equal(t, `it serves "other" and the home's writer serves "test": a home holds one server's files; give "other" a home of its own`, re.Reason)
	assert.Empty(t, w.l.Sessions())

	for _, name := range []string{"test", ""} {
		c, err := attach.Dial(t.Context(), path, attach.Hello{PID: os.Getpid(), Name: name})
		require.NoError(t, err, "%q", name)
		assert.Equal(t, "test", c.Writer.Name)
		c.Close()
	}
}

// TestTempsBesideAPatternPath: the temporary sockets a writer killed
// before its rename left are found (Temps) and cleared by the next
// Listen, also in a home whose path holds a pattern's metacharacters.
func TestTempsBesideAPatternPath(t *testing.T) {
	home := filepath.Join(t.TempDir(), "h[1")
	require.NoError(t, os.Mkdir(home, 0o700))
	path := attach.Path(home)
	require.Equal(t, filepath.Join(home, attach.SocketName), path)
	temp := filepath.Join(home, ".mcp.sock.deadbeef")
	require.NoError(t, os.WriteFile(temp, nil, 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(home, "mcp.sockets"), nil, 0o600)) // not one
	assert.Equal(t, []string{temp}, attach.Temps(path))

	ln, err := attach.Listen(path)
	require.NoError(t, err)
	t.Cleanup(func() { attach.Unlisten(ln, path) })
	assert.NoFileExists(t, temp)
	assert.Empty(t, attach.Temps(path))
	assert.Empty(t, attach.Temps(filepath.Join(t.TempDir(), "missing", "mcp.sock")), "no directory, no temporaries")
}
