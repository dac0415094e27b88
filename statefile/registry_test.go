package statefile_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gofrs/flock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/atomicfile"
	"github.com/mcpkeep/mcpkeep/internal/failpoint"
	"github.com/mcpkeep/mcpkeep/statefile"
)

const (
	roleEnv = "STATEFILE_ROLE"
	regEnv  = "STATEFILE_REGISTRY"
	idEnv   = "STATEFILE_ID"
	rounds  = 50
)

// TestHelperRegistry is a child process of the registry tests.
//
//   - role "churn": registers and unregisters <id>-<round> for 50 rounds,
//     then registers <id>-final and prints "done" and waits for stdin EOF.
//   - role "reader": reads the raw file until stdin closes, validating each
//     read as JSON; prints "reads N invalid M".
//   - role "victim": registers <id>, prints "registered", and waits to be
//     killed.
func TestHelperRegistry(t *testing.T) {
	role := os.Getenv(roleEnv)
	if role == "" {
		return
	}
	reg := statefile.NewRegistry(os.Getenv(regEnv))
	id := os.Getenv(idEnv)
	fail := func(err error) {
		fmt.Println("error", err)
		os.Exit(1)
	}
	self, err := statefile.New(id, "/home/"+id)
	if err != nil {
		fail(err)
	}
	switch role {
	case "churn":
		for i := range rounds {
			rid := fmt.Sprintf("%s-%d", id, i)
			if err := reg.Register(rid, self); err != nil {
				fail(err)
			}
			if err := reg.Unregister(rid); err != nil {
				fail(err)
			}
		}
		if err := reg.Register(id+"-final", self); err != nil {
			fail(err)
		}
		fmt.Println("done")
		io.Copy(io.Discard, os.Stdin)
	case "reader":
		stop := make(chan struct{})
		go func() { io.Copy(io.Discard, os.Stdin); close(stop) }()
		reads, invalid := 0, 0
		for {
			select {
			case <-stop:
				fmt.Printf("reads %d invalid %d\n", reads, invalid)
				os.Exit(0)
			default:
			}
			b, err := os.ReadFile(reg.Path())
			if err != nil {
				continue // not created yet
			}
			reads++
			if !json.Valid(b) {
				invalid++
			}
			if _, err := reg.List(); err != nil {
				invalid++
			}
		}
	case "victim":
		if err := reg.Register(id, self); err != nil {
			fail(err)
		}
		fmt.Println("registered")
		select {}
	}
	os.Exit(0)
}

type proc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
}

func startHelper(t *testing.T, role, reg, id string) *proc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperRegistry$")
	cmd.Env = append(os.Environ(), roleEnv+"="+role, regEnv+"="+reg, idEnv+"="+id)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	p := &proc{cmd: cmd, stdin: stdin, out: bufio.NewReader(stdout)}
	t.Cleanup(func() { p.cmd.Process.Kill(); p.cmd.Wait() })
	return p
}

func (p *proc) line(t *testing.T) string {
	t.Helper()
	s, err := p.out.ReadString('\n')
	require.NoError(t, err)
	return strings.TrimSpace(s)
}

func TestRegistryNoLostUpdates(t *testing.T) {
	reg := filepath.Join(t.TempDir(), "state", "servers.json")
	reader := startHelper(t, "reader", reg, "reader")

	// Victims register and are SIGKILLed: their entries must be pruned.
	for i := range 3 {
		v := startHelper(t, "victim", reg, fmt.Sprintf("victim%d", i))
		require.Equal(t, "registered", v.line(t))
		require.NoError(t, v.cmd.Process.Kill())
		v.cmd.Wait()
	}

	const procs = 16
	churners := make([]*proc, procs)
	for i := range churners {
		churners[i] = startHelper(t, "churn", reg, fmt.Sprintf("p%02d", i))
	}
	for _, c := range churners {
		require.Equal(t, "done", c.line(t))
	}

	// Every churner is alive and registered exactly its final id.
	entries, err := statefile.NewRegistry(reg).List()
	require.NoError(t, err)
	var ids []string
	for _, e := range entries {
		ids = append(ids, e.ID)
	}
	var want []string
	for i := range procs {
		want = append(want, fmt.Sprintf("p%02d-final", i))
	}
	assert.Equal(t, want, ids, "no lost update: the file holds exactly the entries still registered")

	// The file itself, not just the filtered List, holds exactly the final
	// ids: no lost update, no leftover round, and no victim (the writes
	// after their SIGKILL pruned them).
	assert.Equal(t, want, rawIDs(t, reg))

	require.NoError(t, reader.stdin.Close())
	var reads, invalid int
	_, err = fmt.Sscanf(reader.line(t), "reads %d invalid %d", &reads, &invalid)
	require.NoError(t, err)
	assert.Zero(t, invalid, "the reader saw a torn or invalid registry")
	assert.Positive(t, reads)
	t.Logf("reader: %d reads, %d invalid", reads, invalid)

	// Once the churners exit, their entries read as dead and are pruned.
	for _, c := range churners {
		c.stdin.Close()
		c.cmd.Wait()
	}
	entries, err = statefile.NewRegistry(reg).List()
	require.NoError(t, err)
	assert.Empty(t, entries)
}

// rawIDs returns the ids in the registry file as written, dead or alive.
func rawIDs(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var f struct {
		Servers []struct {
			ID string `json:"id"`
		} `json:"servers"`
	}
	require.NoError(t, json.Unmarshal(b, &f))
	var ids []string
	for _, s := range f.Servers {
		ids = append(ids, s.ID)
	}
	return ids
}

// TestHelperRegistryCrash registers while the failpoint armed by its parent
// kills it in the middle of the locked update.
func TestHelperRegistryCrash(t *testing.T) {
	if os.Getenv(roleEnv) != "crash" {
		return
	}
	reg := statefile.NewRegistry(os.Getenv(regEnv))
	err := reg.Register("crasher", newState(t, "crasher", "/c"))
	fmt.Println("survived", err) // not reached when the failpoint kills
	os.Exit(0)
}

// TestRegistryKilledDuringUpdate: a registrant SIGKILLed at any point of
// its update, holding the lock (statefile.registry-locked) or inside the
// replace (atomicfile's points), leaves a registry that parses and holds
// the old entries or the new ones, and frees the lock; the next Register
// works and leaves no temporary file behind.
func TestRegistryKilledDuringUpdate(t *testing.T) {
	old, updated := []string{"parent"}, []string{"crasher", "parent"}
	for _, tc := range []struct {
		point  string
		want   []string // the entries the kill leaves
		orphan bool     // whether it leaves a temporary file
	}{
		{"statefile.registry-locked", old, false},
		{"atomicfile.before-write", old, false},
		{"atomicfile.before-fsync", old, true},
		{"atomicfile.before-rename", old, true},
		{"atomicfile.before-dir-fsync", updated, false},
	} {
		t.Run(tc.point, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "servers.json")
			reg := statefile.NewRegistry(path)
			require.NoError(t, reg.Register("parent", newState(t, "parent", "/p")))
			before, err := os.ReadFile(path)
			require.NoError(t, err)

			cmd := exec.Command(os.Args[0], "-test.run=^TestHelperRegistryCrash$")
			cmd.Env = append(os.Environ(), roleEnv+"=crash", regEnv+"="+path,
				failpoint.EnvVar+"="+tc.point+"=kill")
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			require.ErrorAs(t, err, &exit, string(out))
			ws, ok := exit.Sys().(syscall.WaitStatus)
			require.True(t, ok)
			require.Equal(t, syscall.SIGKILL, ws.Signal(), "the child died at the failpoint: %s", out)

			var f struct {
				Schema  int               `json:"schema"`
				Servers []statefile.Entry `json:"servers"`
			}
			require.NoError(t, atomicfile.ReadJSONStrict(path, &f), "the registry parses")
			assert.Equal(t, tc.want, rawIDs(t, path), "the old entries or the new")
			if tc.want[0] == old[0] {
				after, err := os.ReadFile(path)
				require.NoError(t, err)
				assert.Equal(t, string(before), string(after), "the old file, untouched")
			}
			_, err = reg.List()
			require.NoError(t, err)
			assert.Len(t, temps(t, dir), map[bool]int{false: 0, true: 1}[tc.orphan], "what the kill orphans")

			// The kernel released the dead child's flock.
			l := flock.New(path + ".lock")
			locked, err := l.TryLock()
			require.NoError(t, err)
			assert.True(t, locked, "the lock of a killed registrant is released")
			require.NoError(t, l.Unlock())

			var logs bytes.Buffer
			reg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			require.NoError(t, reg.Register("next", newState(t, "next", "/n")))
			assert.Equal(t, []string{"next", "parent"}, rawIDs(t, path), "the dead crasher pruned")
			assert.Empty(t, temps(t, dir), "the next update removes the orphan")
			if tc.orphan {
				assert.Contains(t, logs.String(), "removed the temporary file of an update that was killed", "and says so")
			}
		})
	}
}

// temps returns the temporary files of atomicfile in dir.
func temps(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		if atomicfile.IsTemp(e.Name()) {
			names = append(names, e.Name())
		}
	}
	return names
}

func TestRegistryInjectedErrorKeepsFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "servers.json")
	reg := statefile.NewRegistry(path)
	require.NoError(t, reg.Register("a", newState(t, "a", "/a")))
	before, err := os.ReadFile(path)
	require.NoError(t, err)

	require.NoError(t, failpoint.Set("statefile.registry-locked=error"))
	t.Cleanup(func() { failpoint.Set("") })
	err = reg.Register("b", newState(t, "b", "/b"))
	require.ErrorIs(t, err, failpoint.ErrInjected)
	require.NoError(t, failpoint.Set(""))

	after, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, string(before), string(after), "a failed update changes nothing")
	require.NoError(t, reg.Register("b", newState(t, "b", "/b")), "and does not leave the lock held")
	assert.Equal(t, []string{"a", "b"}, rawIDs(t, path))
}

func TestRegistryUnregisterLeavesOthersAlone(t *testing.T) {
	path := filepath.Join(t.TempDir(), "servers.json")
	reg := statefile.NewRegistry(path)
	// pid 1 runs, and is not us.
	other := statefile.State{Schema: statefile.SchemaVersion, Name: "other", PID: 1, StartTime: pid1Start(t), Home: "/shared"}
	require.True(t, other.Alive())
	require.NoError(t, reg.Register("/shared", other))

	require.NoError(t, reg.Unregister("/shared"))
	assert.Equal(t, []string{"/shared"}, rawIDs(t, path), "another process's entry stays")

	require.NoError(t, reg.Register("/shared", newState(t, "me", "/shared")))
	require.NoError(t, reg.Unregister("/shared"))
	assert.Empty(t, rawIDs(t, path), "our own entry goes")
}

// TestRegistryEntryWithoutStartTime: an entry with no start time cannot be
// shown to be the process running under its pid now (pid 1 always runs):
// it is hidden from List and pruned by the next write, and Register
// refuses to write one.
func TestRegistryEntryWithoutStartTime(t *testing.T) {
	path := filepath.Join(t.TempDir(), "servers.json")
	fixture, err := os.ReadFile(filepath.Join("..", "testdata", "registry", "no-start-time.json"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, fixture, 0o600))
	reg := statefile.NewRegistry(path)

	list, err := reg.List()
	require.NoError(t, err)
	assert.Empty(t, list, "not alive")

	require.NoError(t, reg.Register("/h", newState(t, "me", "/h")))
	assert.Equal(t, []string{"/h"}, rawIDs(t, path), "pruned")

	err = reg.Register("/pid1", statefile.State{Schema: statefile.SchemaVersion, Name: "x", PID: 1})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "start time")
	assert.Equal(t, []string{"/h"}, rawIDs(t, path), "not written")
}

func TestRegistryDisabled(t *testing.T) {
	reg := statefile.NewRegistry("")
	require.ErrorIs(t, reg.Register("x", newState(t, "x", "/x")), statefile.ErrNoRegistry)
	require.ErrorIs(t, reg.Unregister("x"), statefile.ErrNoRegistry)
	list, err := reg.List()
	require.NoError(t, err)
	assert.Empty(t, list)
}

func TestRegistryBasics(t *testing.T) {
	path := filepath.Join(t.TempDir(), "servers.json")
	reg := statefile.NewRegistry(path)
	list, err := reg.List()
	require.NoError(t, err)
	assert.Empty(t, list, "a missing file is an empty registry")

	s := newState(t, "helios", "/h")
	s.Token = "secret"
	require.NoError(t, reg.Register("/h", s))
	require.NoError(t, reg.Register("/h", s), "registering again replaces")
	list, err = reg.List()
	require.NoError(t, err)
	require.Len(t, list, 1)
	assert.Empty(t, list[0].State.Token, "tokens never enter the registry")
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.NotContains(t, string(raw), "secret")
	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())

	require.NoError(t, reg.Unregister("/h"))
	list, err = reg.List()
	require.NoError(t, err)
	assert.Empty(t, list)
}

// TestRegistrySessions: an entry counts the attached sessions but does not
// list them; the state file does. It keeps the own client, uncounted.
func TestRegistrySessions(t *testing.T) {
	reg := statefile.NewRegistry(filepath.Join(t.TempDir(), "servers.json"))
	s := newState(t, "helios", "/h")
	s.Socket = "/h/mcp.sock"
	s.Sessions = []statefile.Session{{PID: 10, Client: "a", Since: time.Unix(1, 0).UTC()}, {PID: 11, Since: time.Unix(2, 0).UTC()}}
	s.Client = &statefile.Client{Name: "own", Version: "1", Since: time.Unix(3, 0).UTC()}
	require.NoError(t, reg.Register("/h", s))
	list, err := reg.List()
	require.NoError(t, err)
	require.Len(t, list, 1)
	assert.Equal(t, 2, list[0].Sessions, "the server's own client does not count")
	assert.Empty(t, list[0].State.Sessions)
	assert.Equal(t, s.Client, list[0].State.Client, "the entry names the own client")
	assert.Equal(t, "/h/mcp.sock", list[0].State.Socket)
	assert.Len(t, s.Sessions, 2, "the caller's State is left alone")
}

func TestRegistryCorruptFileIsMovedAside(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "servers.json")
	require.NoError(t, os.WriteFile(path, []byte(`{"schema":1,"servers":[{"id":`), 0o600))
	reg := statefile.NewRegistry(path)
	var logs bytes.Buffer
	reg.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
	_, err := reg.List()
	var ce *atomicfile.CorruptError
	require.ErrorAs(t, err, &ce, "a reader reports the corrupt file")
	assert.Equal(t, path, ce.Path)
	assert.Contains(t, err.Error(), "the next server to start or stop moves it aside (to servers.json.corrupt-<UTC time>)",
		"and what becomes of it")
	assert.NotContains(t, err.Error(), "doctor", "doctor repairs homes, not the registry")

	require.NoError(t, reg.Register("/h", newState(t, "x", "/h")), "a writer replaces it")
	list, err := reg.List()
	require.NoError(t, err)
	assert.Len(t, list, 1)
	matches, err := filepath.Glob(path + ".corrupt-*")
	require.NoError(t, err)
	require.Len(t, matches, 1, "the corrupt bytes are kept")
	b, err := os.ReadFile(matches[0])
	require.NoError(t, err)
	assert.Equal(t, `{"schema":1,"servers":[{"id":`, string(b))

	var rec struct {
		Level   string `json:"level"`
		MovedTo string `json:"moved_to"`
		Err     string `json:"err"`
	}
	require.NoError(t, json.Unmarshal(logs.Bytes(), &rec), "one log record: %s", logs.String())
	assert.Equal(t, "WARN", rec.Level)
	assert.Equal(t, matches[0], rec.MovedTo, "the log says where the bytes went")
	assert.Contains(t, rec.Err, path+":1: corrupt: ")
	assert.NotContains(t, rec.Err, "(", "no advice to do what is being done")
}

func TestRegistryNewerSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "servers.json")
	require.NoError(t, os.WriteFile(path, []byte(`{"schema":99,"servers":[]}`), 0o600))
	_, err := statefile.NewRegistry(path).List()
	require.ErrorIs(t, err, statefile.ErrUnknownVersion)
}

func TestDefaultRegistryPath(t *testing.T) {
	t.Setenv(statefile.RegistryEnv, "/x/reg.json")
	assert.Equal(t, "/x/reg.json", statefile.DefaultRegistryPath())
	t.Setenv(statefile.RegistryEnv, "")
	assert.Equal(t, "", statefile.DefaultRegistryPath(), "empty disables")
	os.Unsetenv(statefile.RegistryEnv)
	t.Setenv("XDG_STATE_HOME", "/state")
	assert.Equal(t, "/state/mcpkeep/servers.json", statefile.DefaultRegistryPath())
	t.Setenv("XDG_STATE_HOME", "")
	t.Setenv("HOME", "/home/me")
	assert.Equal(t, "/home/me/.local/state/mcpkeep/servers.json", statefile.DefaultRegistryPath())
}
