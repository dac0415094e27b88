package lifecycle_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/gitstore"
	"github.com/mcpkeep/mcpkeep/internal/testserver/gitremote"
	"github.com/mcpkeep/mcpkeep/lifecycle"
	"github.com/mcpkeep/mcpkeep/statefile"
)

// TestElectedCatchesUpFromRemote: a standby elected with a git remote in
// sync mode fetches what the last writer pushed before it is active, and
// resigns the term when the remote cannot be reached. A standby never
// pushes, not even the history the remote lacks.
func TestElectedCatchesUpFromRemote(t *testing.T) {
	bare := gitremote.Bare(t)
	url := gitremote.FileURL(bare)
	fe := newFakeElector()
	opts := options(t)
	opts.Elector, opts.NewServer = fe, notesServer
	opts.Remote = lifecycle.RemoteOptions{URL: url, Mode: "sync", Interval: time.Hour}
	r := run(t, opts)
	config := filepath.Join(opts.Home, "config")
	r.poll(t, "the standby's catch-up fetch in its state file", func() bool {
		st, err := statefile.Read(filepath.Join(opts.Home, statefile.FileName))
		return err == nil && st.Remote != nil && !st.Remote.LastFetch.IsZero()
	})
	_, missing := gitremote.Output(t, bare, "rev-parse", "-q", "--verify", "main")
	require.Error(t, missing, "the standby pushed its history to the remote")
	// This host was the writer once: its history is the remote's.
	gitremote.Run(t, config, "push", "-q", bare, "HEAD:refs/heads/main")

	// The last writer, elsewhere, acknowledged a change: it is on the
	// remote.
	peer, err := gitstore.Init(t.TempDir(), &gitstore.Options{HoldsLock: true})
	require.NoError(t, err)
	defer peer.Close()
	pr, err := gitstore.NewRemote(peer, &gitstore.RemoteOptions{URL: url, Credentials: &gitstore.Credentials{}})
	require.NoError(t, err)
	defer pr.Close()
	_, err = pr.Fetch(t.Context())
	require.NoError(t, err)
	c, err := peer.Stage("the last writer's change", []gitstore.Change{{Path: "notes.yaml", Data: []byte("notes: [from the last writer]\n")}})
	require.NoError(t, err)
	require.NoError(t, c.Wait())
	require.NoError(t, pr.Push(t.Context()))

	// Remote unreachable: elected, the standby cannot catch up, and resigns.
	require.NoError(t, os.Rename(bare, bare+".away"))
	first := fe.grant(t, 1)
	r.poll(t, "the first term resigned", first.resigned.Load)
	assert.Equal(t, statefile.RoleStandby, r.role(t).Role)

	// Reachable again: elected, it has the last writer's change first.
	require.NoError(t, os.Rename(bare+".away", bare))
	fe.grant(t, 2)
	r.poll(t, "role active", func() bool { return r.role(t).Role == statefile.RoleActive })
	data, err := os.ReadFile(filepath.Join(config, "notes.yaml"))
	require.NoError(t, err)
	assert.Equal(t, "notes: [from the last writer]\n", string(data))
	require.NoError(t, r.stop(t))
	head, err := peer.Head()
	require.NoError(t, err)
	log := gitremote.Run(t, config, "log", "--format=%H")
	assert.Contains(t, log, head, "the last writer's commit is in the new writer's history")
	tip := strings.TrimSpace(gitremote.Run(t, bare, "rev-parse", "main"))
	assert.Equal(t, strings.TrimSpace(gitremote.Run(t, config, "rev-parse", "HEAD")), tip, "the new writer pushed its catch-up merge")
}
