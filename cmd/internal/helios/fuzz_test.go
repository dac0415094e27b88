package helios_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/internal/mcptest"
	"github.com/mcpkeep/mcpkeep/lifecycle"
)

// fuzzMarker is planted in files outside the home; no answer may hold it.
const fuzzMarker = "MARKER-OUTSIDE-4d2f9a"

// fuzzTools are the tools FuzzToolAnswers calls, by the fuzzer's pick.
var fuzzTools = []string{"get_persona", "set_active_persona", "update_preference", "list_personas",
	"get_config", "commit_changes", "history", "rollback", "server_info"}

// FuzzToolAnswers runs helios on the harness in one home and, for each
// input, puts something at config/personas/fz.yaml or config/base.yaml (a
// file of the fuzzer's bytes, a link to a file outside the home that parses
// as a persona or one that does not, a link to a directory outside, a fifo)
// and calls a tool with the fuzzer's arguments. No answer, text or
// structured, may hold the marker planted in the files outside the home.
// What it planted is taken away again after each input.
func FuzzToolAnswers(f *testing.F) {
	outside := f.TempDir()
	require.NoError(f, os.WriteFile(filepath.Join(outside, "evil.yaml"),
		[]byte("name: fz\npreferences:\n  secret: "+fuzzMarker+"\n"), 0o600))
	require.NoError(f, os.WriteFile(filepath.Join(outside, "shadow"),
		[]byte("root:"+fuzzMarker+":20228:0:99999:7:::\n"+fuzzMarker+": x\n"), 0o600))
	require.NoError(f, os.WriteFile(filepath.Join(outside, "fz.yaml"), []byte("name: fz\nnote: "+fuzzMarker+"\n"), 0o600))
	// Where personas/ waits while a link stands in its place: outside the
	// home, so that no commit of hand edits takes it for one.
	aside := filepath.Join(f.TempDir(), "personas")
	cs, home := serve(f, func(*lifecycle.Options) {})
	configDir := filepath.Join(home, "config")
	base, err := os.ReadFile(filepath.Join(configDir, "base.yaml"))
	require.NoError(f, err)

	for tool := range fuzzTools {
		for kind := range 6 {
			f.Add(uint8(tool), uint8(kind), false, "fz", "tone", "warm", "HEAD", []byte("name: fz\npreferences: {tone: dry}\n"))
		}
	}
	f.Add(uint8(0), uint8(0), false, "fz", "k", "v", "HEAD~1", []byte("name: fz\nroot:*:20228: x\n"))
	f.Add(uint8(2), uint8(1), true, "", "tone", "x", "HEAD", []byte(nil))
	f.Add(uint8(7), uint8(2), true, "default", "k", "v", "HEAD~2", []byte("a: &a [x, *a]\n"))

	f.Fuzz(func(t *testing.T, tool, kind uint8, inBase bool, name, key, value, rev string, content []byte) {
		for _, s := range []string{name, key, value, rev, string(content)} {
			if strings.Contains(s, fuzzMarker) {
				t.Skip("the input itself holds the marker")
			}
		}
		target := filepath.Join(configDir, "personas", "fz.yaml")
		if inBase {
			target = filepath.Join(configDir, "base.yaml")
		}
		personas := filepath.Join(configDir, "personas")
		require.NoError(t, os.RemoveAll(target))
		switch kind % 6 {
		case 0:
			require.NoError(t, os.WriteFile(target, content, 0o600))
		case 1:
			require.NoError(t, os.Symlink(filepath.Join(outside, "evil.yaml"), target))
		case 2:
			require.NoError(t, os.Symlink(filepath.Join(outside, "shadow"), target))
		case 3:
			require.NoError(t, syscall.Mkfifo(target, 0o600))
		case 4:
			// personas/ itself a link to the outside directory, which
			// holds an fz.yaml.
			require.NoError(t, os.Rename(personas, aside))
			require.NoError(t, os.Symlink(outside, personas))
		case 5:
			require.NoError(t, os.Symlink(filepath.Join(personas, "default.yaml"), target))
		}
		defer func() {
			if kind%6 == 4 {
				require.NoError(t, os.Remove(personas))
				require.NoError(t, os.Rename(aside, personas))
			} else if err := os.Remove(target); err != nil && !os.IsNotExist(err) {
				require.NoError(t, err)
			}
			if inBase {
				require.NoError(t, os.WriteFile(target, base, 0o600))
			}
		}()

		tname := fuzzTools[int(tool)%len(fuzzTools)]
		args := map[string]any{}
		switch tname {
		case "get_persona", "set_active_persona":
			args["name"] = name
		case "update_preference":
			args["persona"], args["key"], args["value"] = name, key, value
		case "commit_changes":
			args["message"] = value
		case "history":
			args["path"] = key
		case "rollback":
			args["rev"] = rev
		}
		res := mcptest.CallTool(t, cs, tname, args)
		structured, err := json.Marshal(res.StructuredContent)
		require.NoError(t, err)
		answer := mcptest.Text(res) + string(structured)
		require.NotContains(t, answer, fuzzMarker, "%s(%v) answered with bytes of a file outside the home", tname, args)
	})
}
