package crashsuite_test

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fixture reads testdata/<kind>/<name> at the module root.
func fixture(t *testing.T, kind, name string) []byte {
	t.Helper()
	return readFile(t, filepath.Join("..", "..", "testdata", filepath.FromSlash(kind), name))
}

// fixtures lists testdata/<kind>.
func fixtures(t *testing.T, kind string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join("..", "..", "testdata", kind))
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	require.NotEmpty(t, names)
	return names
}

// prefixed returns dir/name for each name.
func prefixed(dir string, names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = dir + "/" + n
	}
	return out
}

// installed returns a helios home holding one acknowledged preference,
// default.tone = "kept", and the arguments that start helios on it.
func installed(t *testing.T, b binSet) (home string, args []string) {
	t.Helper()
	home = filepath.Join(t.TempDir(), "home")
	args = heliosArgs(t, home)
	s := serve(t, b.helios, args, launchOpts{})
	commitOf(t, s.update(t, "default", "tone", "kept"))
	s.stop(t)
	return home, args
}

// put writes data at rel in home, as a crash, a disk or a careless hand
// would leave it.
func put(t *testing.T, home, rel string, data []byte) {
	t.Helper()
	require.NoError(t, os.WriteFile(filepath.Join(home, filepath.FromSlash(rel)), data, 0o600))
}

// assertKept checks that the acknowledged preference is still there.
func assertKept(t *testing.T, s *server) {
	t.Helper()
	r := s.call(t, "get_persona", map[string]any{"name": "default"})
	require.False(t, r.IsError, r.Text())
	assert.Contains(t, string(r.Structured), `"tone":"kept"`, "the acknowledged preference survived")
}

// assertSaved checks that a file under dir whose name contains name holds
// exactly data: a quarantined file keeps every byte.
func assertSaved(t *testing.T, dir, name string, data []byte) {
	t.Helper()
	var saved []string
	found := false
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || found || !d.Type().IsRegular() || !strings.Contains(d.Name(), name) {
			return err
		}
		saved = append(saved, d.Name())
		b, err := os.ReadFile(p)
		found = err == nil && bytes.Equal(b, data)
		return err
	})
	require.NoError(t, err)
	assert.True(t, found, "no file named like %q in %s holds the %d bytes of the bad input (saved: %q)", name, dir, len(data), saved)
}

// stopAndDoctor stops helios and requires mcpkeep doctor to find a clean
// home: the start repaired everything.
func stopAndDoctor(t *testing.T, b binSet, s *server, home string) {
	t.Helper()
	s.stop(t)
	assert.NoError(t, checker{mcpkeep: b.mcpkeep}.doctor(t.Context(), home))
}

// mcpkeep runs the mcpkeep CLI and returns its stdout, stderr and exit
// status.
func mcpkeep(t *testing.T, b binSet, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), b.mcpkeep, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil {
		require.ErrorAs(t, err, &ee)
	}
	return stdout.String(), stderr.String(), cmd.ProcessState.ExitCode()
}

// TestBadInput starts the real binaries on homes and registries holding
// the corrupt, torn and foreign files of testdata/, and checks the clear
// error or the repair: every bad file is quarantined with its bytes
// intact, and the acknowledged preference is never lost.
func TestBadInput(t *testing.T) {
	b := binaries(t)

	t.Run("corrupt persona YAML", func(t *testing.T) {
		for _, name := range fixtures(t, "yaml") {
			if name == "valid.yaml" {
				continue
			}
			t.Run(name, func(t *testing.T) {
				home, args := installed(t, b)
				bad := fixture(t, "yaml", name)
				put(t, home, "config/personas/default.yaml", bad)

				out, _, code := mcpkeep(t, b, "doctor", "--home", home)
				assert.Equal(t, 1, code, "doctor finds the problem")
				assert.Contains(t, out, "corrupt-config config/personas/default.yaml: would be quarantined to backups/ and restored from commit ")

				s := serve(t, b.helios, args, launchOpts{})
				assertKept(t, s) // restored from the last good commit
				assertSaved(t, filepath.Join(home, "backups"), "default.yaml", bad)
				s.logged(t, "kind=corrupt-config path=config/personas/default.yaml")
				stopAndDoctor(t, b, s, home)
			})
		}
	})

	t.Run("corrupt base YAML", func(t *testing.T) {
		home, args := installed(t, b)
		bad := fixture(t, "recovery", "corrupt-base.yaml")
		put(t, home, "config/base.yaml", bad)
		s := serve(t, b.helios, args, launchOpts{})
		r := s.call(t, "get_config", map[string]any{})
		require.False(t, r.IsError, r.Text())
		assert.Contains(t, string(r.Structured), `"active_persona":"default"`, "restored from git")
		assertSaved(t, filepath.Join(home, "backups"), "base.yaml", bad)
		stopAndDoctor(t, b, s, home)
	})

	t.Run("a persona added by hand that never parsed", func(t *testing.T) {
		home, args := installed(t, b)
		bad := fixture(t, "yaml", "truncated.yaml")
		put(t, home, "config/personas/new.yaml", bad)
		s := serve(t, b.helios, args, launchOpts{})
		// No good version in history: quarantined for the user, never
		// replaced with something else.
		s.logged(t, "no good version in history: fix the copy in backups/ and put it back, then commit")
		assert.NoFileExists(t, filepath.Join(home, "config", "personas", "new.yaml"))
		assertSaved(t, filepath.Join(home, "backups"), "new.yaml", bad)
		assertKept(t, s)
		stopAndDoctor(t, b, s, home)
	})

	// The files of a home that are not config: each bad one is moved or
	// copied into backups/ and replaced, and the server starts.
	for _, tc := range []struct {
		file     string   // in the home
		fixtures []string // testdata/<dir>/<name>
		savedAs  string   // part of the saved copy's name
		logged   string   // what helios says about it
	}{
		{"state.json", prefixed("state", fixtures(t, "state")), "state.json", "kind=stale-state path=state.json"},
		{".lock", prefixed("lock", fixtures(t, "lock")), ".lock.", "reclaimed a stale lock"},
		{".version", []string{"homes/incomplete-garbage-stamp/.version", "json/garbage.bin", "json/torn.json"}, ".version.", "unreadable stamp quarantined"},
	} {
		t.Run("bad "+tc.file, func(t *testing.T) {
			for _, f := range tc.fixtures {
				t.Run(f, func(t *testing.T) {
					home, args := installed(t, b)
					bad := fixture(t, path.Dir(f), path.Base(f))
					put(t, home, tc.file, bad)
					s := serve(t, b.helios, args, launchOpts{})
					s.logged(t, tc.logged)
					assertSaved(t, filepath.Join(home, "backups"), tc.savedAs, bad)
					assert.Empty(t, checkServing(newHome(home), s.cmd.Process.Pid), "the state and PID files are the live server's")
					assertKept(t, s)
					stopAndDoctor(t, b, s, home)
				})
			}
		})
	}

	t.Run(".version of a newer schema", func(t *testing.T) {
		home, args := installed(t, b)
		put(t, home, ".version", fixture(t, "homes/too-new", ".version"))
		before := treeHash(t, home)
		s := launch(t, b.helios, args, launchOpts{})
		assert.Equal(t, 1, s.wait(t))
		assert.Contains(t, s.stderr.String(), "helios: "+filepath.Join(home, ".version")+": schema 99 is newer than this server's 1; upgrade this server, never downgrade a home")
		assert.Equal(t, before, treeHash(t, home), "nothing changed")
	})

	t.Run("corrupt registry", func(t *testing.T) {
		for _, name := range []string{"garbage.bin", "torn.json", "doubled.json"} {
			t.Run(name, func(t *testing.T) {
				home, _ := installed(t, b)
				registry := filepath.Join(t.TempDir(), "servers.json")
				bad := fixture(t, "json", name)
				require.NoError(t, os.WriteFile(registry, bad, 0o600))
				s := serve(t, b.helios, []string{"--home", home, "--registry", registry}, launchOpts{})
				assertServers(t, b, registry, s.cmd.Process.Pid)
				aside, err := filepath.Glob(registry + ".corrupt-*")
				require.NoError(t, err)
				require.Len(t, aside, 1, "the corrupt registry is moved aside")
				assert.Equal(t, bad, readFile(t, aside[0]), "with its bytes intact")
				s.stop(t)
				assertServers(t, b, registry, 0)
			})
		}
	})

	t.Run("registry with a dead server", func(t *testing.T) {
		home, _ := installed(t, b)
		registry := filepath.Join(t.TempDir(), "servers.json")
		require.NoError(t, os.WriteFile(registry, fixture(t, "registry", "dead-entry.json"), 0o600))
		s := serve(t, b.helios, []string{"--home", home, "--registry", registry}, launchOpts{})
		assertServers(t, b, registry, s.cmd.Process.Pid)
		s.stop(t)
		assertServers(t, b, registry, 0)
		assert.Empty(t, checker{registry: registry}.checkRegistry(), "the dead entry was pruned")
	})

	t.Run("registry of a newer schema", func(t *testing.T) {
		home, _ := installed(t, b)
		registry := filepath.Join(t.TempDir(), "servers.json")
		newer := fixture(t, "registry", "newer.json")
		require.NoError(t, os.WriteFile(registry, newer, 0o600))
		s := serve(t, b.helios, []string{"--home", home, "--registry", registry}, launchOpts{})
		assertKept(t, s) // registration is not needed to serve
		s.logged(t, "registry: could not register")
		_, stderr, code := mcpkeep(t, b, "servers", "--registry", registry)
		assert.Equal(t, 1, code)
		assert.Contains(t, stderr, "registry schema 99 is newer than this toolkit's 1 (upgrade mcpkeep)")
		s.stop(t)
		assert.Equal(t, newer, readFile(t, registry), "a newer registry is never rewritten by an older toolkit")
	})
}

// assertServers checks that mcpkeep servers lists exactly the server of
// pid (none when pid is 0).
func assertServers(t *testing.T, b binSet, registry string, pid int) {
	t.Helper()
	out, stderr, code := mcpkeep(t, b, "servers", "--registry", registry, "--json")
	require.Equal(t, 0, code, stderr)
	var list struct {
		Servers []struct {
			PID int `json:"pid"`
		} `json:"servers"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &list))
	var pids []int
	for _, s := range list.Servers {
		pids = append(pids, s.PID)
	}
	if pid == 0 {
		assert.Empty(t, pids)
	} else {
		assert.Equal(t, []int{pid}, pids)
	}
}
