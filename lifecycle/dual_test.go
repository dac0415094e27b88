package lifecycle_test

import (
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"testing/fstest"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/atomicfile"
	"github.com/mcpkeep/mcpkeep/bootstrap"
	"github.com/mcpkeep/mcpkeep/gitstore"
	"github.com/mcpkeep/mcpkeep/internal/mcptest"
	"github.com/mcpkeep/mcpkeep/lifecycle"
	"github.com/mcpkeep/mcpkeep/recovery"
)

// kvFile is the config file of kvServer: a YAML map of strings.
const kvFile = "kv.yaml"

type setArgs struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

type setOut struct {
	Commit string `json:"commit"`
}

// kvServer has one tool, set, that sets a key of kvFile through
// Env.Update, with the message "set <key>".
func kvServer(env *lifecycle.Env) (*mcp.Server, error) {
	s := mcp.NewServer(&mcp.Implementation{Name: "kv", Version: "v0"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "set", Description: "set a key"},
		func(ctx context.Context, _ *mcp.CallToolRequest, in setArgs) (*mcp.CallToolResult, setOut, error) {
			path := filepath.Join(env.ConfigDir, kvFile)
			hash, err := env.Update(ctx, "set "+in.Key, []string{kvFile}, func() error {
				kv := map[string]string{}
				if err := atomicfile.ReadYAMLStrict(path, &kv); err != nil {
					return err
				}
				kv[in.Key] = in.Value
				return atomicfile.WriteYAML(path, kv, 0)
			})
			return nil, setOut{Commit: hash}, err
		})
	return s, nil
}

// TestRunStdioAndHTTPUpdateAtOnce: one Harness serves a stdio client and
// an HTTP client that change config at the same time, every call of each
// in flight at once. Every change is acknowledged, on disk and committed
// on its own, the work tree is clean and recovery finds nothing. Run it
// with -race: both transports call into one Env.
func TestRunStdioAndHTTPUpdateAtOnce(t *testing.T) {
	const n = 20
	opts := options(t)
	opts.Spec = bootstrap.Spec{Schema: 1, Defaults: fstest.MapFS{kvFile: {Data: []byte("{}\n")}}}
	opts.NewServer = kvServer
	opts.HTTP = "127.0.0.1:0"
	r := run(t, opts)
	st := r.state(t)
	require.NotNil(t, st.HTTP)
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, nil)
	web, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: st.HTTP.URL,
		HTTPClient: &http.Client{Transport: mcptest.Bearer{Token: st.Token}}}, nil)
	require.NoError(t, err)
	defer web.Close()

	type call struct {
		key, value string
		res        *mcp.CallToolResult
		err        error
	}
	calls := make([]call, 0, 2*n)
	for _, transport := range []string{"stdio", "http"} {
		for i := range n {
			calls = append(calls, call{key: fmt.Sprintf("%s%02d", transport, i), value: fmt.Sprintf("v%02d", i)})
		}
	}
	var wg sync.WaitGroup
	for i := range calls {
		c, cs := &calls[i], r.client
		if i >= n {
			cs = web
		}
		wg.Go(func() {
			c.res, c.err = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "set",
				Arguments: setArgs{Key: c.key, Value: c.value}})
		})
	}
	wg.Wait()
	acked := map[string]string{} // commit hash by key
	for _, c := range calls {
		require.NoError(t, c.err, c.key)
		require.False(t, c.res.IsError, "%s: %s", c.key, mcptest.Text(c.res))
		out, ok := c.res.StructuredContent.(map[string]any)
		require.True(t, ok, "%s: %v", c.key, c.res.StructuredContent)
		hash, _ := out["commit"].(string)
		require.NotEmpty(t, hash, "%s is acknowledged with a commit", c.key)
		acked[c.key] = hash
	}
	require.NoError(t, web.Close())
	require.NoError(t, r.stop(t))

	kv := map[string]string{}
	config := filepath.Join(opts.Home, "config")
	require.NoError(t, atomicfile.ReadYAMLStrict(filepath.Join(config, kvFile), &kv))
	for _, c := range calls {
		assert.Equal(t, c.value, kv[c.key], "%s on disk", c.key)
	}
	store, err := gitstore.Open(config, &gitstore.Options{ReadOnly: true})
	require.NoError(t, err)
	defer store.Close()
	history, err := store.History(kvFile, 0)
	require.NoError(t, err)
	messages := map[string]string{} // message by commit hash
	for _, c := range history {
		messages[c.Hash] = c.Message
	}
	assert.Len(t, history, 2*n+1, "the install's commit and one per change")
	for key, hash := range acked {
		assert.Equal(t, "set "+key, messages[hash], "the commit acknowledged for %s", key)
	}
	status, err := exec.Command("git", "-c", "safe.directory=*", "-C", config, "status", "--porcelain").Output()
	require.NoError(t, err)
	assert.Empty(t, string(status), "a clean work tree")
	report, err := recovery.Run(t.Context(), recovery.Options{Home: opts.Home, DryRun: true})
	require.NoError(t, err)
	assert.True(t, report.Clean(), "%s", report)
}
