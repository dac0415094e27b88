package statefile_test

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/atomicfile"
	"github.com/mcpkeep/mcpkeep/statefile"
)

// nobody is the user the permission tests run their checks as: root
// reads and writes any file whatever its mode.
var nobody = &syscall.Credential{Uid: 65534, Gid: 65534}

// denied is what a child of TestPermissionDenied reports of one call.
type denied struct {
	Err        string `json:"err"`        // the error, "" for nil
	Permission bool   `json:"permission"` // it matches fs.ErrPermission
	NotExist   bool   `json:"not_exist"`  // it matches fs.ErrNotExist
	Corrupt    bool   `json:"corrupt"`    // it matches atomicfile.ErrCorrupt
	Entries    int    `json:"entries"`    // what List returned
}

// TestHelperDenied is a child of TestPermissionDenied: it makes the call
// named by STATEFILE_OP on STATEFILE_PATH and prints what came back as one
// JSON line.
func TestHelperDenied(t *testing.T) {
	op := os.Getenv("STATEFILE_OP")
	if os.Getenv("STATEFILE_HELPER") != "denied" || op == "" {
		return
	}
	path := os.Getenv("STATEFILE_PATH")
	reg := statefile.NewRegistry(path)
	var d denied
	var err error
	switch op {
	case "list":
		var list []statefile.Entry
		list, err = reg.List()
		d.Entries = len(list)
	case "register":
		err = reg.Register("/nobody", newState(t, "nobody", "/nobody"))
	case "unregister":
		err = reg.Unregister("/nobody")
	case "read":
		_, err = statefile.Read(path)
	default:
		t.Fatalf("unknown op %q", op)
	}
	if err != nil {
		d.Err = err.Error()
		d.Permission = errors.Is(err, fs.ErrPermission)
		d.NotExist = errors.Is(err, fs.ErrNotExist)
		d.Corrupt = errors.Is(err, atomicfile.ErrCorrupt)
	}
	require.NoError(t, json.NewEncoder(os.Stdout).Encode(d))
}

// TestPermissionDenied: a registry or state file this user may not read,
// or in a directory it may not search, is an error that matches
// fs.ErrPermission and names the file. It is not a missing file, an empty
// registry or a corrupt one, and nothing is moved aside or replaced: a
// seed project reported every OSError as "not in registry".
func TestPermissionDenied(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root, to run the check as nobody (uid 65534): root reads any file whatever its mode")
	}
	exe := exeForNobody(t)
	registry := registryBytes(t)
	state := stateBytes(t)
	for _, tc := range []struct {
		name string
		file string      // the file under test, in its directory
		data []byte      // its bytes, owned by root
		mode fs.FileMode // its mode
		dir  fs.FileMode // its directory's mode
		lock bool        // a root-owned <file>.lock, readable by all, beside it
		ops  []string
	}{
		// The directory lets nobody create, lock and rename: only the
		// read stands between a writer and replacing root's entries.
		{name: "unreadable registry", file: "servers.json", data: registry, mode: 0o600, dir: 0o777, lock: true,
			ops: []string{"list", "register", "unregister"}},
		{name: "registry in an unsearchable directory", file: "servers.json", data: registry, mode: 0o644, dir: 0o700, lock: true,
			ops: []string{"list", "register", "unregister"}},
		// The registry's own directory is not made yet, under one nobody
		// may not search: not "missing", but "not allowed".
		{name: "registry under an unsearchable directory", file: filepath.Join("sub", "servers.json"), data: nil, dir: 0o700,
			ops: []string{"list", "register", "unregister"}},
		{name: "unreadable state file", file: statefile.FileName, data: state, mode: 0o600, dir: 0o777,
			ops: []string{"read"}},
		{name: "state file in an unsearchable directory", file: statefile.FileName, data: state, mode: 0o644, dir: 0o700,
			ops: []string{"read"}},
	} {
		for _, op := range tc.ops {
			t.Run(tc.name+"/"+op, func(t *testing.T) {
				dir := sharedDir(t)
				path := filepath.Join(dir, tc.file)
				if tc.data != nil {
					require.NoError(t, os.WriteFile(path, tc.data, tc.mode))
					require.NoError(t, os.Chmod(path, tc.mode))
				}
				if tc.lock {
					require.NoError(t, os.WriteFile(path+".lock", nil, 0o644))
					require.NoError(t, os.Chmod(path+".lock", 0o644))
				}
				require.NoError(t, os.Chmod(dir, tc.dir))
				before := listDir(t, dir)

				cmd := exec.Command(exe, "-test.run=^TestHelperDenied$")
				cmd.Env = append(os.Environ(), "STATEFILE_HELPER=denied", "STATEFILE_OP="+op, "STATEFILE_PATH="+path)
				cmd.SysProcAttr = &syscall.SysProcAttr{Credential: nobody}
				var stderr strings.Builder
				cmd.Stderr = &stderr
				out, err := cmd.Output()
				require.NoError(t, err, "child: %s%s", out, stderr.String())
				var got denied
				line, _, _ := strings.Cut(string(out), "\n")
				require.NoError(t, json.Unmarshal([]byte(line), &got), "child: %s%s", out, stderr.String())

				t.Logf("%s as nobody: %s", op, got.Err)
				require.NotEmpty(t, got.Err, "%s as nobody returned nil (%d entries), not the permission error", op, got.Entries)
				assert.True(t, got.Permission, "matches fs.ErrPermission: %s", got.Err)
				assert.False(t, got.NotExist, "not a missing file: %s", got.Err)
				assert.False(t, got.Corrupt, "not a corrupt file: %s", got.Err)
				assert.Contains(t, got.Err, path, "names the file")
				assert.Contains(t, got.Err, "uid 65534 (run as the user", "says who was refused and what to do")

				assert.Equal(t, before, listDir(t, dir), "nothing created, moved aside or removed")
				if tc.data != nil {
					b, err := os.ReadFile(path)
					require.NoError(t, err)
					assert.Equal(t, string(tc.data), string(b), "the file is untouched")
				}
			})
		}
	}
}

// sharedDir returns a new directory, outside root's 0700 t.TempDir, that
// nobody can reach.
func sharedDir(t *testing.T) string {
	t.Helper()
	parent, err := os.MkdirTemp("", "statefile-nobody-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(parent) })
	require.NoError(t, os.Chmod(parent, 0o755))
	dir := filepath.Join(parent, "d")
	require.NoError(t, os.Mkdir(dir, 0o755))
	return dir
}

// listDir returns the names in dir with their sizes, as root sees them.
func listDir(t *testing.T, dir string) map[string]int64 {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	names := make(map[string]int64, len(entries))
	for _, e := range entries {
		fi, err := e.Info()
		require.NoError(t, err)
		names[e.Name()] = fi.Size()
	}
	return names
}

// registryBytes returns a registry file holding one live entry, pid 1, so
// that reading it as empty would be a visible loss.
func registryBytes(t *testing.T) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "servers.json")
	s := statefile.State{Schema: statefile.SchemaVersion, Name: "init", PID: 1, StartTime: pid1Start(t), Home: "/init"}
	require.NoError(t, statefile.NewRegistry(path).Register("/init", s))
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return b
}

// stateBytes returns a valid state file of this process.
func stateBytes(t *testing.T) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), statefile.FileName)
	s := newState(t, "root", "/root-home")
	require.NoError(t, statefile.Write(path, &s))
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return b
}
