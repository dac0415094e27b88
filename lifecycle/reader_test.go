package lifecycle_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/atomicfile"
	"github.com/mcpkeep/mcpkeep/lifecycle"
	"github.com/mcpkeep/mcpkeep/recovery"
)

// TestRunMaxFileSize: Options.MaxFileSize reaches start-up recovery, which
// quarantines a larger config file and restores it from git, and
// Env.Reader, which refuses a larger file and a link below ConfigDir.
func TestRunMaxFileSize(t *testing.T) {
	opts := options(t)
	require.NoError(t, run(t, opts).stop(t)) // installs the home
	notes := filepath.Join(opts.Home, "config", "notes.yaml")
	require.NoError(t, os.WriteFile(notes, []byte("notes: ["+strings.Repeat("x", 60)+"]\n"), 0o600))

	opts.MaxFileSize = 50
	var env *lifecycle.Env
	opts.NewServer = func(e *lifecycle.Env) (*mcp.Server, error) {
		env = e
		return newServer(e)
	}
	r := run(t, opts)
	require.NotNil(t, env)
	assert.Equal(t, int64(50), env.MaxFileSize)
	require.Len(t, env.Report.Findings, 1, "%s", env.Report)
	f := env.Report.Findings[0]
	assert.Equal(t, recovery.KindRefusedFile, f.Kind)
	assert.Equal(t, "config/notes.yaml", f.Path)
	assert.Contains(t, f.Action, "restored from commit")

	data, err := env.Reader().ReadFile(notes)
	require.NoError(t, err)
	assert.Equal(t, "notes: []\n", string(data))
	require.NoError(t, os.WriteFile(notes, []byte(strings.Repeat("#", 51)), 0o600))
	_, err = env.Reader().ReadFile(notes)
	require.ErrorIs(t, err, atomicfile.ErrTooLarge)
	require.NoError(t, os.Remove(notes))
	require.NoError(t, os.Symlink(filepath.Join(opts.Home, "state.json"), notes))
	_, err = env.Reader().ReadFile(notes)
	require.ErrorIs(t, err, atomicfile.ErrNotRegular)
	require.NoError(t, os.Remove(notes))
	require.NoError(t, r.stop(t))
}
