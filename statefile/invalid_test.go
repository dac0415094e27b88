package statefile_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/statefile"
)

// TestRegistryInvalidEntry: an entry of a registry that parses but that
// is not a valid entry (no id, no pid or one below 1, no start time, a
// home that is not an absolute path, or not an entry at all) cannot be
// proven alive. List hides it and the next write drops it, each with a
// WARN naming the registry file and the problem; the other entries are
// kept, and the file is never moved aside as corrupt.
//
// In the fixtures (testdata/registry), pid 1 with start time 1 stands for
// a live process: the test puts in its own pid and start time, so that
// only the flaw under test can condemn the entry.
func TestRegistryInvalidEntry(t *testing.T) {
	for _, tc := range []struct {
		file    string
		problem string
	}{
		{"no-pid.json", "pid 0 is not a process id"},
		{"pid-zero.json", "pid 0 is not a process id"},
		{"pid-negative.json", "pid -1 is not a process id"},
		{"no-start-time.json", "no process start time"},
		{"home-relative.json", `home ".helios" is not an absolute path`},
		{"home-empty.json", `home "" is not an absolute path`},
		{"home-garbage.json", fmt.Sprintf("home %q is not an absolute path", "\x00\a\ufffd\ufffd")},
		{"home-nul.json", `home "/home/a/\x00.helios" is not an absolute path`},
		{"home-not-a-string.json", "not an entry: json: cannot unmarshal number"},
		{"no-id.json", "no id"},
		{"null-entry.json", "no id"},
		{"entry-not-an-object.json", "not an entry: json: cannot unmarshal string"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "servers.json")
			require.NoError(t, os.WriteFile(path, withLiveEntry(t, tc.file), 0o600))
			reg := statefile.NewRegistry(path)
			var logs bytes.Buffer
			reg.Logger = slog.New(slog.NewJSONHandler(&logs, nil))

			list, err := reg.List()
			require.NoError(t, err, "one bad entry does not make the registry unreadable")
			require.Len(t, list, 1)
			assert.Equal(t, "/live", list[0].ID, "the valid entry is kept")
			warn := oneWarn(t, &logs)
			assert.Equal(t, path, warn.Path, "the WARN names the registry file")
			assert.Contains(t, warn.Problem, tc.problem)
			assert.Contains(t, warn.Msg, "ignoring an invalid entry")

			require.NoError(t, reg.Register("/next", newState(t, "next", "/next")))
			assert.Equal(t, []string{"/live", "/next"}, rawIDs(t, path), "the invalid entry is dropped, the others kept")
			warn = oneWarn(t, &logs)
			assert.Equal(t, path, warn.Path)
			assert.Contains(t, warn.Problem, tc.problem)
			assert.Contains(t, warn.Msg, "dropped an invalid entry")
			aside, err := filepath.Glob(path + ".corrupt-*")
			require.NoError(t, err)
			assert.Empty(t, aside, "not taken for a corrupt file")

			_, err = reg.List()
			require.NoError(t, err)
			assert.Empty(t, logs.String(), "nothing more to say once it is dropped")
		})
	}
}

// TestRegisterRefusesInvalidEntry: Register refuses the entries the
// registry would drop, so a server is never registered to be pruned.
func TestRegisterRefusesInvalidEntry(t *testing.T) {
	path := filepath.Join(t.TempDir(), "servers.json")
	reg := statefile.NewRegistry(path)
	for _, home := range []string{"", ".helios", "/home/a/\x00.helios"} {
		err := reg.Register("/h", newState(t, "h", home))
		require.Error(t, err, "home %q", home)
		assert.Contains(t, err.Error(), fmt.Sprintf("home %q is not an absolute path", home))
	}
	assert.NoFileExists(t, path, "nothing written")
}

// withLiveEntry returns the registry fixture file with pid 1 and start
// time 1 replaced by this process's, and with an entry /live of this
// process added.
func withLiveEntry(t *testing.T, file string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "testdata", "registry", file))
	require.NoError(t, err)
	var f struct {
		Schema  int   `json:"schema"`
		Servers []any `json:"servers"`
	}
	require.NoError(t, json.Unmarshal(b, &f))
	self := newState(t, "live", "/live")
	for _, s := range f.Servers {
		e, _ := s.(map[string]any)
		st, _ := e["state"].(map[string]any)
		if st["pid"] == 1.0 && st["start_time"] == 1.0 {
			st["pid"], st["start_time"] = self.PID, self.StartTime
		}
	}
	f.Servers = append(f.Servers, statefile.Entry{ID: "/live", State: self})
	b, err = json.Marshal(f)
	require.NoError(t, err)
	return b
}

// warnRecord is a WARN of the registry about an invalid entry.
type warnRecord struct {
	Level   string `json:"level"`
	Msg     string `json:"msg"`
	Path    string `json:"path"`
	Problem string `json:"problem"`
}

// oneWarn reads and consumes the one record in logs, a WARN.
func oneWarn(t *testing.T, logs *bytes.Buffer) warnRecord {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	logs.Reset()
	require.Len(t, lines, 1, "one log record: %q", lines)
	var w warnRecord
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &w), lines[0])
	assert.Equal(t, "WARN", w.Level)
	return w
}

// FuzzRegistryList: whatever the registry file holds, List does not
// panic, and every entry it returns is a valid one.
func FuzzRegistryList(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("..", "testdata", "registry", "*.json"))
	require.NoError(f, err)
	require.NotEmpty(f, files)
	for _, name := range files {
		b, err := os.ReadFile(name)
		require.NoError(f, err)
		f.Add(b)
	}
	path := filepath.Join(f.TempDir(), "servers.json")
	reg := statefile.NewRegistry(path)
	f.Fuzz(func(t *testing.T, data []byte) {
		require.NoError(t, os.WriteFile(path, data, 0o600))
		list, err := reg.List()
		if err != nil {
			return
		}
		for _, e := range list {
			assert.NotEmpty(t, e.ID)
			assert.Positive(t, e.State.PID)
			assert.NotZero(t, e.State.StartTime)
			assert.True(t, filepath.IsAbs(e.State.Home), "home %q", e.State.Home)
		}
	})
}
