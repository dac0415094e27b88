package lifecycle_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/lifecycle"
	"github.com/mcpkeep/mcpkeep/statefile"
)

// TestHomeUnderAPatternPath: a home whose path holds a pattern's
// metacharacters ("h[1": filepath.Glob refuses such a pattern) installs,
// takes a change, stops and starts again: nothing on the way globs the
// home's path.
func TestHomeUnderAPatternPath(t *testing.T) {
	opts := options(t)
	opts.Home = filepath.Join(t.TempDir(), "h[1", "home")
	var env *lifecycle.Env
	opts.NewServer = func(e *lifecycle.Env) (*mcp.Server, error) {
		env = e
		return newServer(e)
	}
	for i, note := range []string{"notes: [a]\n", "notes: [a, b]\n"} {
		r := run(t, opts)
		assert.Equal(t, statefile.StatusReady, r.state(t).Status, "start %d", i)
		_, err := env.Update(context.Background(), "note", func(tx *lifecycle.Tx) error {
			return tx.WriteFile("notes.yaml", []byte(note))
		})
		require.NoError(t, err, "start %d", i)
		require.NoError(t, r.stop(t), "start %d", i)
	}
	history, err := env.Store.History("notes.yaml", 0)
	require.NoError(t, err)
	assert.Len(t, history, 3, "the install and two changes")
}
