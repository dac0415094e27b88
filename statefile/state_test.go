package statefile_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/atomicfile"
	procinfo "github.com/mcpkeep/mcpkeep/internal/proc" // proc is a helper type of registry_test.go
	"github.com/mcpkeep/mcpkeep/statefile"
)

// newState returns a State for this process, as a server makes its own.
func newState(tb testing.TB, name, home string) statefile.State {
	tb.Helper()
	s, err := statefile.New(name, home)
	require.NoError(tb, err)
	return s
}

// pid1Start returns the start time of pid 1, a process that always runs
// and is never the test.
func pid1Start(t *testing.T) uint64 {
	t.Helper()
	start, err := procinfo.StartTime(1)
	require.NoError(t, err)
	if start == 0 {
		t.Skip("pid 1 started in the first clock tick of this boot: no start time to check")
	}
	return start
}

func TestAlive(t *testing.T) {
	self := newState(t, "t", t.TempDir())
	assert.True(t, self.Alive(), "ourselves")

	wrong := self
	wrong.StartTime++
	assert.False(t, wrong.Alive(), "our pid with another start time is a reused pid")

	cmd := exec.Command("true")
	require.NoError(t, cmd.Run()) // exited and reaped
	dead := self
	dead.PID = cmd.Process.Pid
	assert.False(t, dead.Alive(), "a pid that exited")

	otherBoot := self
	otherBoot.BootID = "not-this-boot"
	assert.False(t, otherBoot.Alive(), "a record from another boot")

	var none *statefile.State
	assert.False(t, none.Alive())
}

// TestNoStartTimeIsDead: a state file with no start time names a pid but
// cannot show that the process running under it now (pid 1 always runs)
// is the one that wrote it: it reads as dead, and as not ours, and Write
// refuses to make one.
func TestNoStartTimeIsDead(t *testing.T) {
	s, err := statefile.Read(filepath.Join("..", "testdata", "state", "no-start-time.json"))
	require.NoError(t, err)
	require.Equal(t, 1, s.PID)
	require.Zero(t, s.StartTime)
	assert.False(t, s.Alive())
	assert.False(t, s.Ours())

	ours := newState(t, "t", "/h")
	ours.StartTime = 0
	assert.False(t, ours.Alive(), "our own pid, without the start time")
	assert.False(t, ours.Ours())

	for _, bad := range []statefile.State{{PID: 1}, {PID: 0, StartTime: 1}, ours} {
		path := filepath.Join(t.TempDir(), statefile.FileName)
		err := statefile.Write(path, &bad)
		require.Error(t, err, "%+v", bad)
		assert.Contains(t, err.Error(), path)
		assert.Contains(t, err.Error(), "build it with New")
		assert.NoFileExists(t, path)
	}
}

func TestAliveOtherUserIsAlive(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to run a child as nobody")
	}
	// As nobody, kill(1, 0) fails with EPERM: pid 1 must still read alive.
	start := pid1Start(t)
	cmd := exec.Command(exeForNobody(t), "-test.run=^TestHelperAliveAsNobody$")
	cmd.Env = append(os.Environ(), "STATEFILE_HELPER=alive", "STATEFILE_PID1_START="+strconv.FormatUint(start, 10))
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	assert.Contains(t, string(out), "alive=true")
}

func TestHelperAliveAsNobody(t *testing.T) {
	if os.Getenv("STATEFILE_HELPER") != "alive" {
		return
	}
	start, _ := strconv.ParseUint(os.Getenv("STATEFILE_PID1_START"), 10, 64)
	s := statefile.State{PID: 1, StartTime: start}
	os.Stdout.WriteString("alive=" + map[bool]string{true: "true", false: "false"}[s.Alive()] + "\n")
}

func TestWriteReadRemove(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, statefile.FileName)
	s := newState(t, "helios", dir)
	s.Token = "secret"
	s.Socket = filepath.Join(dir, "mcp.sock")
	s.Sessions = []statefile.Session{{PID: 10, Client: "claude-code", ClientVersion: "2.1", Since: time.Unix(1, 0).UTC()}}
	s.Client = &statefile.Client{Name: "cursor", Version: "1.2.3", Since: time.Unix(2, 0).UTC()}
	require.NoError(t, statefile.Write(path, &s))

	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())

	got, err := statefile.Read(path)
	require.NoError(t, err)
	assert.Equal(t, s.PID, got.PID)
	assert.Equal(t, s.StartTime, got.StartTime)
	assert.Equal(t, "secret", got.Token)
	assert.Equal(t, s.Socket, got.Socket)
	assert.Equal(t, s.Sessions, got.Sessions)
	assert.Equal(t, s.Client, got.Client)
	assert.True(t, got.Ours())

	require.NoError(t, statefile.Remove(path))
	_, err = os.Stat(path)
	assert.ErrorIs(t, err, os.ErrNotExist)
	assert.NoError(t, statefile.Remove(path), "removing a missing file is fine")
}

// TestReadWithoutClient: a state file written before State.Client existed
// reads, with no own client.
func TestReadWithoutClient(t *testing.T) {
	path := filepath.Join(t.TempDir(), statefile.FileName)
	old := `{"schema":1,"name":"helios","pid":4242,"start_time":99,"home":"/h","stdio":true,` +
		`"started_at":"2026-11-20T10:42:01Z","status":"ready","socket":"/h/mcp.sock",` +
		`"sessions":[{"pid":10,"client":"a","since":"2026-11-20T10:43:00Z"}]}`
	require.NoError(t, os.WriteFile(path, []byte(old), 0o600))
	got, err := statefile.Read(path)
	require.NoError(t, err)
	assert.Nil(t, got.Client)
	assert.Equal(t, 4242, got.PID)
	require.Len(t, got.Sessions, 1)
	assert.Equal(t, "a", got.Sessions[0].Client)
}

func TestRemoveLeavesOthersAlone(t *testing.T) {
	path := filepath.Join(t.TempDir(), statefile.FileName)
	other := newState(t, "other", "/h")
	other.PID, other.StartTime = 1, 1
	require.NoError(t, statefile.Write(path, &other))
	before, err := os.ReadFile(path)
	require.NoError(t, err)

	require.NoError(t, statefile.Remove(path))
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, before, after)
}

func TestRemoveLeavesCorruptFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), statefile.FileName)
	require.NoError(t, os.WriteFile(path, []byte(`{"schema":1,"pid":`), 0o600))
	require.NoError(t, statefile.Remove(path))
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, `{"schema":1,"pid":`, string(b), "left for recovery to quarantine")
}

func TestWriteNil(t *testing.T) {
	path := filepath.Join(t.TempDir(), statefile.FileName)
	require.Error(t, statefile.Write(path, nil))
	_, err := os.Stat(path)
	require.ErrorIs(t, err, os.ErrNotExist)
}

func TestSymlinkNotFollowed(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "precious")
	require.NoError(t, os.WriteFile(target, []byte("keep me"), 0o644))
	path := filepath.Join(dir, statefile.FileName)
	require.NoError(t, os.Symlink(target, path))

	s := newState(t, "t", dir)
	require.NoError(t, statefile.Write(path, &s))

	b, err := os.ReadFile(target)
	require.NoError(t, err)
	assert.Equal(t, "keep me", string(b), "the symlink's target is untouched")
	fi, err := os.Lstat(path)
	require.NoError(t, err)
	assert.True(t, fi.Mode().IsRegular(), "the symlink was replaced by the state file")
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
}

func TestReadBadFiles(t *testing.T) {
	for _, tc := range []struct {
		file    string
		corrupt bool
		newer   bool
	}{
		{file: "torn.json", corrupt: true},
		{file: "garbage.bin", corrupt: true},
		{file: "empty.json", corrupt: true},
		{file: "nopid.json", corrupt: true},
		{file: "newer.json", newer: true},
	} {
		t.Run(tc.file, func(t *testing.T) {
			path := filepath.Join("..", "testdata", "state", tc.file)
			_, err := statefile.Read(path)
			require.Error(t, err)
			if tc.corrupt {
				var ce *atomicfile.CorruptError
				require.ErrorAs(t, err, &ce)
				assert.Equal(t, path, ce.Path)
				assert.Contains(t, err.Error(), "moves it to backups/", "a start or doctor --fix sets it aside")
				assert.Contains(t, err.Error(), "mcpkeep doctor --fix")
			}
			if tc.newer {
				require.ErrorIs(t, err, statefile.ErrUnknownVersion)
			}
		})
	}
	_, err := statefile.Read(filepath.Join(t.TempDir(), "missing.json"))
	require.ErrorIs(t, err, os.ErrNotExist)

	s, err := statefile.Read(filepath.Join("..", "testdata", "state", "valid.json"))
	require.NoError(t, err)
	assert.Equal(t, 4242, s.PID)
}

func TestURL(t *testing.T) {
	for _, tc := range []struct {
		host string
		port int
		want string
	}{
		{"localhost", 8080, "http://127.0.0.1:8080/mcp"},
		{"LocalHost", 8080, "http://127.0.0.1:8080/mcp"},
		{"", 8080, "http://127.0.0.1:8080/mcp"},
		{"127.0.0.1", 1, "http://127.0.0.1:1/mcp"},
		{"0.0.0.0", 2, "http://127.0.0.1:2/mcp"},
		{"::", 3, "http://127.0.0.1:3/mcp"},
		{"::1", 9, "http://[::1]:9/mcp"},
		{"10.0.0.2", 9, "http://10.0.0.2:9/mcp"},
	} {
		assert.Equal(t, tc.want, statefile.URL(tc.host, tc.port), "host %q", tc.host)
	}
}

func FuzzReadState(f *testing.F) {
	for _, name := range []string{"valid.json", "torn.json", "garbage.bin", "newer.json", "empty.json", "nopid.json"} {
		b, err := os.ReadFile(filepath.Join("..", "testdata", "state", name))
		require.NoError(f, err)
		f.Add(b)
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(dir, "state.json")
		require.NoError(t, os.WriteFile(path, data, 0o600))
		s, err := statefile.Read(path)
		if err == nil {
			require.NotNil(t, s)
			assert.Positive(t, s.PID)
		}
	})
}

// exeForNobody copies the test binary where nobody can execute it: the go
// build cache directories are 0700 under root.
func exeForNobody(t *testing.T) string {
	dir, err := os.MkdirTemp("", "statefile-nobody-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o755))
	data, err := os.ReadFile(os.Args[0])
	require.NoError(t, err)
	exe := filepath.Join(dir, "test.exe")
	require.NoError(t, os.WriteFile(exe, data, 0o755))
	return exe
}
