package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/internal/mcptest"
	"github.com/mcpkeep/mcpkeep/internal/testserver/gitremote"
)

// TestSyncReportsWhatItDidBeforeItFailed: a sync that fetched and merged
// and then could not push (the remote refuses it) reports the merge, with
// the push's error beside it, in JSON and in text, and exits 1: the merge
// changed the home's files, and nothing may hide that.
func TestSyncReportsWhatItDidBeforeItFailed(t *testing.T) {
	home := installed(t)
	bare := gitremote.Bare(t)
	url := gitremote.FileURL(bare)
	r := mcpkeep(t, "sync", "--home", home, "--remote", url)
	require.Equal(t, exitOK, r.code, r.stdout+r.stderr)

	other := filepath.Join(t.TempDir(), "other")
	gitCLI(t, filepath.Dir(other), "clone", "--branch", "main", url, other)
	require.NoError(t, os.WriteFile(filepath.Join(other, "theirs.yaml"), []byte("a: 1\n"), 0o600))
	gitCLI(t, other, "add", "theirs.yaml")
	gitCLI(t, other, "commit", "-m", "theirs")
	gitCLI(t, other, "push", "origin", "main")
	// A change of the home's own, so that the fetch merges.
	cmd := exec.CommandContext(t.Context(), heliosBin, "--home", home, "--registry", "")
	cmd.Stdin = strings.NewReader(mcptest.Handshake + mcptest.ToolCall(t, 1, "update_preference", map[string]string{"key": "tone", "value": "mine"}))
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	hook := filepath.Join(bare, "hooks", "pre-receive")
	require.NoError(t, os.MkdirAll(filepath.Dir(hook), 0o755))
	require.NoError(t, os.WriteFile(hook, []byte("#!/bin/sh\necho refused by the test >&2\nexit 1\n"), 0o755))

	r = mcpkeep(t, "sync", "--home", home, "--remote", url, "--json")
	require.Equal(t, exitError, r.code, r.stdout+r.stderr)
	var got struct {
		Error string `json:"error"`
		Fetch *struct {
			Action string   `json:"action"`
			Taken  []string `json:"taken"`
		} `json:"fetch"`
		Pushed bool `json:"pushed"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &got), r.stdout)
	assert.NotEmpty(t, got.Error, "the push's error")
	require.NotNil(t, got.Fetch, "what the fetch did: %s", r.stdout)
	assert.Equal(t, "merge", got.Fetch.Action)
	assert.Contains(t, got.Fetch.Taken, "theirs.yaml")
	assert.False(t, got.Pushed)
	assert.FileExists(t, filepath.Join(home, "config", "theirs.yaml"), "the merge took it")

	r = mcpkeep(t, "sync", "--home", home, "--remote", url)
	require.Equal(t, exitError, r.code, r.stdout+r.stderr)
	assert.Contains(t, r.stdout, "fetched:", "text says what the fetch did")
	assert.Contains(t, r.stdout, "pushed:    no: the push failed")
	assert.NotContains(t, r.stdout, "the remote had every commit")
	assert.NotEmpty(t, r.stderr, "and the error")
}
