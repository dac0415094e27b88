package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/atomicfile"
	"github.com/mcpkeep/mcpkeep/cmd/internal/helios"
	"github.com/mcpkeep/mcpkeep/crashtest"
	"github.com/mcpkeep/mcpkeep/internal/mcptest"
	"github.com/mcpkeep/mcpkeep/internal/testserver/gitremote"
	"github.com/mcpkeep/mcpkeep/statefile"
)

// peerHost is one helios on a "machine" of its own: its own HOME and home.
type peerHost struct {
	name, home, env string
	s               *server
	cs              *mcp.ClientSession
}

// startPeer starts helios for host h with the remote flags args, and
// connects a client over stdio.
func startPeer(t *testing.T, h *peerHost, args ...string) {
	t.Helper()
	args = append([]string{"--home", h.home, "--registry", ""}, args...)
	p, err := crashtest.Start(t.Context(), crashtest.Cmd{Path: heliosBin, Args: args, Env: []string{"HOME=" + h.env}})
	require.NoError(t, err)
	h.s = &server{Process: p, home: h.home}
	t.Cleanup(h.s.stop)
	client := mcp.NewClient(&mcp.Implementation{Name: "test-" + h.name, Version: "v0"}, nil)
	h.cs, err = client.Connect(t.Context(), &mcp.IOTransport{Reader: p.Stdout(), Writer: p.Stdin()}, nil)
	require.NoError(t, err)
	h.s.ready(t)
}

// stopPeer closes the client (helios's stdin) and waits for a clean exit.
func stopPeer(t *testing.T, h *peerHost) {
	t.Helper()
	require.NoError(t, h.cs.Close())
	require.NoError(t, h.s.exit(t, hangAfter), "a clean stop at stdin EOF; stderr:\n%s", h.s.Stderr())
}

func newPeer(t *testing.T, name string) *peerHost {
	dir := t.TempDir()
	h := &peerHost{name: name, home: filepath.Join(dir, "helios"), env: filepath.Join(dir, "user")}
	require.NoError(t, os.Mkdir(h.env, 0o700))
	return h
}

// pref reads a preference of a persona from h's work tree.
func pref(t *testing.T, h *peerHost, persona, key string) string {
	t.Helper()
	var p helios.Persona
	if err := atomicfile.ReadYAMLStrict(filepath.Join(h.home, "config", "personas", persona+".yaml"), &p); err != nil {
		return ""
	}
	return p.Preferences[key]
}

func setPref(t *testing.T, h *peerHost, persona, key, value string) {
	t.Helper()
	res := mcptest.CallTool(t, h.cs, "update_preference", map[string]any{"persona": persona, "key": key, "value": value})
	require.False(t, res.IsError, "%s: update_preference: %s", h.name, mcptest.Text(res))
}

// remoteState reads h's state file's remote status.
func remoteState(t *testing.T, h *peerHost) *statefile.Remote {
	st, err := statefile.Read(filepath.Join(h.home, statefile.FileName))
	if err != nil {
		return nil
	}
	return st.Remote
}

// mcpkeep runs the operator CLI and returns its output and exit code.
func mcpkeep(t *testing.T, env string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(mcpkeepBin, args...)
	cmd.Env = append(os.Environ(), "HOME="+env)
	out, err := cmd.Output()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return string(out), code
}

// historyResult is what the history tool returns, as far as conflicts go.
type historyResult struct {
	Commits []struct {
		Hash        string   `json:"hash"`
		Conflicts   []string `json:"conflicts"`
		ConflictTag string   `json:"conflict_tag"`
	} `json:"commits"`
	Conflicts []struct {
		Tag   string   `json:"tag"`
		Files []string `json:"files"`
	} `json:"conflicts"`
}

// TestTwoHostsOneRemoteAsync is issue 15's acceptance for git remotes:
// two hosts (separate HOME and home directories) on one remote served
// over HTTP in async mode. Writes on each reach the other; a change to
// the same file on both while the remote is down, once it is back, is
// merged keeping both versions (the tree, the merge commit, the tag),
// and doctor, sync and the history tool name it. The state file tells
// how far behind the remote is while it is down.
func TestTwoHostsOneRemoteAsync(t *testing.T) {
	bare := gitremote.Bare(t)
	srv := gitremote.Serve(t, bare, nil)
	flags := []string{"--remote", srv.URL(), "--remote-interval", "200ms"}
	a, b := newPeer(t, "a"), newPeer(t, "b")
	startPeer(t, a, flags...)
	startPeer(t, b, flags...)

	// Each one's writes reach the other.
	setPref(t, a, "default", "from_a", "1")
	a.s.poll(t, "a's change on b", func() bool { return pref(t, b, "default", "from_a") == "1" })
	setPref(t, b, "concise", "from_b", "1")
	b.s.poll(t, "b's change on a", func() bool { return pref(t, a, "concise", "from_b") == "1" })

	// The remote goes away; both change default.yaml, a also concise.yaml.
	srv.Stop()
	setPref(t, a, "default", "tone", "a's tone")
	setPref(t, a, "concise", "only_a", "yes")
	setPref(t, b, "default", "tone", "b's tone")
	a.s.poll(t, "a's state file to say the remote is behind", func() bool {
		r := remoteState(t, a)
		return r != nil && r.Ahead >= 2 && r.Error != ""
	})
	out, code := mcpkeep(t, a.env, "status", "--home", a.home, "--json")
	var status struct {
		Remote *statefile.Remote `json:"remote"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &status), out)
	require.NotNil(t, status.Remote, "mcpkeep status shows the remote (exit %d): %s", code, out)
	assert.GreaterOrEqual(t, status.Remote.Ahead, 2, "mcpkeep status says how far behind the remote is")

	// Back: they converge on one history, with both versions kept.
	srv.Start()
	converged := func() bool {
		ha := strings.TrimSpace(git(t, filepath.Join(a.home, "config"), "rev-parse", "HEAD"))
		hb := strings.TrimSpace(git(t, filepath.Join(b.home, "config"), "rev-parse", "HEAD"))
		out, err := gitremote.Output(t, bare, "rev-parse", "main")
		return err == nil && ha == hb && hb == strings.TrimSpace(out) && pref(t, a, "default", "tone") == pref(t, b, "default", "tone")
	}
	a.s.poll(t, "both hosts and the remote on one commit", converged)

	// One of them merged: its version of default.yaml is in the tree;
	// the other's is in the merge commit and in its conflicts tag.
	merger, other := a, b
	if strings.TrimSpace(git(t, filepath.Join(a.home, "config"), "tag", "-l", "conflicts/*")) == "" {
		merger, other = b, a
	}
	mc := filepath.Join(merger.home, "config")
	tag := strings.TrimSpace(git(t, mc, "tag", "-l", "conflicts/*"))
	require.NotEmpty(t, tag, "a conflicts tag on one host")
	require.NotContains(t, tag, "\n", "one tag")
	kept := merger.name + "'s tone"
	assert.Equal(t, kept, pref(t, a, "default", "tone"), "the tree keeps the merger's version")
	assert.Equal(t, "yes", pref(t, merger, "concise", "only_a"), "a file changed on one side only is taken")
	assert.Contains(t, git(t, mc, "show", tag+":personas/default.yaml"), other.name+"'s tone", "the tag holds the other version")
	merge := strings.TrimSpace(git(t, bare, "log", "--merges", "-1", "--format=%H"))
	require.NotEmpty(t, merge, "a merge commit on the remote")
	assert.Contains(t, git(t, bare, "show", merge+"^2:personas/default.yaml")+git(t, bare, "show", merge+"^1:personas/default.yaml"),
		other.name+"'s tone", "the merge commit records both versions")
	assert.Contains(t, git(t, bare, "log", "-1", "--format=%B", merge), "Conflict: personas/default.yaml")

	// The history tool names it.
	hist := mcptest.Call[historyResult](t, merger.cs, "history", map[string]any{"path": "personas/default.yaml"})
	found := false
	for _, c := range hist.Commits {
		if c.ConflictTag == tag {
			found = true
			assert.Equal(t, []string{"personas/default.yaml"}, c.Conflicts)
		}
	}
	assert.True(t, found, "the history of default.yaml lists the merge that kept it: %+v", hist)
	require.Len(t, hist.Conflicts, 1)
	assert.Equal(t, tag, hist.Conflicts[0].Tag)

	// doctor and sync name it, beside the running server and after.
	out, code = mcpkeep(t, merger.env, "doctor", "--home", merger.home)
	assert.Equal(t, 1, code, "doctor finds the conflict: %s", out)
	assert.Contains(t, out, "merge-conflict config/personas/default.yaml")
	assert.Contains(t, out, tag)
	out, code = mcpkeep(t, merger.env, "sync", "--home", merger.home)
	assert.Equal(t, 3, code, "sync beside a live server: %s", out)
	assert.Contains(t, out, "conflict:  personas/default.yaml")

	stopPeer(t, a)
	stopPeer(t, b)
	out, code = mcpkeep(t, merger.env, "sync", "--home", merger.home, "--remote", srv.URL(), "--json")
	require.Equal(t, 0, code, "mcpkeep sync: %s", out)
	var synced struct {
		Remote struct {
			Ahead, Behind int
			Remote        string
		} `json:"remote"`
		Conflicts []struct {
			Tag   string   `json:"tag"`
			Files []string `json:"files"`
		} `json:"conflicts"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &synced), out)
	assert.Zero(t, synced.Remote.Ahead)
	assert.Zero(t, synced.Remote.Behind)
	require.Len(t, synced.Conflicts, 1)
	assert.Equal(t, []string{"personas/default.yaml"}, synced.Conflicts[0].Files)
	out, code = mcpkeep(t, merger.env, "sync", "--home", merger.home, "--resolve", tag)
	require.Equal(t, 0, code, "mcpkeep sync --resolve: %s", out)
	out, code = mcpkeep(t, merger.env, "doctor", "--home", merger.home)
	assert.Equal(t, 0, code, "resolved: doctor is clean: %s", out)

	for _, dir := range []string{bare, filepath.Join(a.home, "config"), filepath.Join(b.home, "config")} {
		gitremote.Run(t, dir, "fsck", "--full", "--strict", "--no-dangling")
	}
	for _, h := range []*peerHost{a, b} {
		assert.Empty(t, git(t, filepath.Join(h.home, "config"), "status", "--porcelain"), h.name)
		stray, err := os.ReadDir(h.env)
		require.NoError(t, err)
		assert.Empty(t, stray, "%s: nothing written into HOME", h.name)
	}
}

// TestSyncModeRemoteDown: in sync mode a change is answered only once the
// remote has it; with the remote down it fails, clearly, and nothing of
// it is anywhere; back up, changes go through again.
func TestSyncModeRemoteDown(t *testing.T) {
	bare := gitremote.Bare(t)
	srv := gitremote.Serve(t, bare, nil)
	h := newPeer(t, "a")
	startPeer(t, h, "--remote", srv.URL(), "--remote-mode", "sync")
	config := filepath.Join(h.home, "config")
	remoteHead := func() string { return strings.TrimSpace(git(t, bare, "rev-parse", "main")) }
	answered := mcptest.Call[struct{ Commit string }](t, h.cs, "update_preference", map[string]any{"key": "tone", "value": "first"})
	assert.Equal(t, answered.Commit, remoteHead(), "answered once the remote has it")

	srv.Stop()
	before := remoteHead()
	history := mcptest.Call[historyResult](t, h.cs, "history", nil)
	res := mcptest.CallTool(t, h.cs, "update_preference", map[string]any{"key": "tone", "value": "second"})
	require.True(t, res.IsError, "the change fails with the remote down")
	text := mcptest.Text(res)
	assert.Contains(t, text, "not made")
	assert.Contains(t, text, "remote")
	assert.Equal(t, "first", pref(t, h, "default", "tone"), "nothing half-applied: the file")
	assert.Equal(t, history, mcptest.Call[historyResult](t, h.cs, "history", nil), "nothing half-applied: the history")

	srv.Start()
	assert.Equal(t, before, remoteHead())
	answered = mcptest.Call[struct{ Commit string }](t, h.cs, "update_preference", map[string]any{"key": "tone", "value": "third"})
	assert.Equal(t, answered.Commit, remoteHead())
	stopPeer(t, h)
	assert.Equal(t, answered.Commit, strings.TrimSpace(git(t, config, "rev-parse", "HEAD")))
	assert.NotContains(t, git(t, bare, "log", "--format=%s", "main"), "second")
	gitremote.Run(t, bare, "fsck", "--full", "--strict", "--no-dangling")
	gitremote.Run(t, config, "fsck", "--full", "--strict", "--no-dangling")
}
