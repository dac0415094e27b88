package lifecycle_test

import (
	"context"
	"net/http"
	"os/exec"
	"path/filepath"
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
			hash, err := env.Update(ctx, "set "+in.Key, func(tx *lifecycle.Tx) error {
				kv := map[string]string{}
				if err := tx.ReadYAMLStrict(kvFile, &kv); err != nil {
					return err
				}
				kv[in.Key] = in.Value
				return tx.WriteYAML(kvFile, kv)
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

	calls := mcptest.UpdateAtOnce(t, n, "set", func(key, value string) any { return setArgs{Key: key, Value: value} },
		map[string]*mcp.ClientSession{"stdio": r.client, "http": web})
	require.NoError(t, web.Close())
	require.NoError(t, r.stop(t))

	kv := map[string]string{}
	config := filepath.Join(opts.Home, "config")
	require.NoError(t, atomicfile.ReadYAMLStrict(filepath.Join(config, kvFile), &kv))
	for _, c := range calls {
		assert.Equal(t, c.Value, kv[c.Key], "%s on disk", c.Key)
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
	for _, c := range calls {
		assert.Equal(t, "set "+c.Key, messages[c.Commit], "the commit acknowledged for %s", c.Key)
	}
	status, err := exec.Command("git", "-c", "safe.directory=*", "-C", config, "status", "--porcelain").Output()
	require.NoError(t, err)
	assert.Empty(t, string(status), "a clean work tree")
	report, err := recovery.Run(t.Context(), recovery.Options{Home: opts.Home, DryRun: true})
	require.NoError(t, err)
	assert.True(t, report.Clean(), "%s", report)
}
