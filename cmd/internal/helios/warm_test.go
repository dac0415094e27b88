package helios

import (
	"encoding/json"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/lifecycle"
)

// A server built while Warm runs, sharing its schema cache, lists the same
// tools with the same schemas as one built with no cache at all.
func TestWarmSameTools(t *testing.T) {
	cold, add := build(&lifecycle.Env{}, nil)
	for _, a := range add {
		a()
	}
	var wg sync.WaitGroup
	wg.Go(Warm)
	warm, err := NewServer(&lifecycle.Env{})
	require.NoError(t, err)
	wg.Wait()
	again, err := NewServer(&lifecycle.Env{}) // every schema from the cache now
	require.NoError(t, err)

	want := toolsJSON(t, cold)
	assert.Len(t, want, 9)
	assert.Equal(t, want, toolsJSON(t, warm))
	assert.Equal(t, want, toolsJSON(t, again))
}

// toolsJSON returns what s answers to tools/list, each tool as JSON.
func toolsJSON(t *testing.T, s *mcp.Server) []string {
	t.Helper()
	ct, st := mcp.NewInMemoryTransports()
	ss, err := s.Connect(t.Context(), st, nil)
	require.NoError(t, err)
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, nil).Connect(t.Context(), ct, nil)
	require.NoError(t, err)
	defer cs.Close()
	res, err := cs.ListTools(t.Context(), nil)
	require.NoError(t, err)
	var out []string
	for _, tool := range res.Tools {
		b, err := json.Marshal(tool)
		require.NoError(t, err)
		out = append(out, string(b))
	}
	return out
}
