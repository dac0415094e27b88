package main

import (
	"path/filepath"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/bootstrap"
)

// TestHistoryOfAnotherServer: on the home of a server other than helios,
// history of a path never committed names, as an example, a file that
// home has (none for a home with no files), never one of helios's.
func TestHistoryOfAnotherServer(t *testing.T) {
	for name, files := range map[string]fstest.MapFS{
		"todo":     {"todos/1.yaml": {Data: []byte("id: 1\ntitle: milk\n")}},
		"no files": {},
	} {
		t.Run(name, func(t *testing.T) {
			home := filepath.Join(t.TempDir(), "home")
			_, err := bootstrap.Ensure(t.Context(), bootstrap.Spec{Home: home, Schema: 1, Server: "todo", Defaults: files})
			require.NoError(t, err)
			r := mcpkeep(t, "history", "--home", home, "nope.yaml")
			require.Equal(t, exitOK, r.code, r.stderr)
			want := "no commits: no commit of the config has ever held nope.yaml (paths are relative to " + filepath.Join(home, "config")
			if len(files) > 0 {
				want += ", such as todos/1.yaml"
			}
			assert.Equal(t, want+")\n", r.stdout)
		})
	}
}
