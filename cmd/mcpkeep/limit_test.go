package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/bootstrap"
	"github.com/mcpkeep/mcpkeep/internal/testserver/gitremote"
	"github.com/mcpkeep/mcpkeep/lifecycle"
	"github.com/mcpkeep/mcpkeep/recovery"
	"github.com/mcpkeep/mcpkeep/statefile"
)

// bigName is the config file, larger than the default limit, that a home
// of limitedHome holds.
const bigName = "big.yaml"

// bigYAML returns a valid YAML document of about size bytes.
func bigYAML(size int) []byte {
	line := "- " + strings.Repeat("x", 62) + "\n"
	return []byte("items:\n" + strings.Repeat(line, size/len(line)))
}

// limitedHome returns a home whose server ran once, and stopped, with
// Options.MaxFileSize limit; its install committed a valid 2 MiB config
// file (bigName) as the file's only version.
func limitedHome(t *testing.T, limit int64) (home string, big []byte) {
	t.Helper()
	home = filepath.Join(t.TempDir(), "home")
	big = bigYAML(2 << 20)
	h, err := lifecycle.New(lifecycle.Options{Name: "limited", Version: "1", Home: home,
		Spec:    bootstrap.Spec{Schema: 1, Defaults: fstest.MapFS{bigName: {Data: big, Mode: 0o600}}},
		NoStdio: true, HTTP: "127.0.0.1:0", Exclusive: true, NoRegistry: true, MaxFileSize: limit,
		NewServer: func(*lifecycle.Env) (*mcp.Server, error) {
			return mcp.NewServer(&mcp.Implementation{Name: "limited", Version: "1"}, nil), nil
		}})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- h.Run(ctx) }()
	deadline := time.Now().Add(hangAfter)
	for {
		st, err := statefile.Read(filepath.Join(home, statefile.FileName))
		if err == nil && st.Status == statefile.StatusReady {
			break
		}
		select {
		case err := <-done:
			cancel()
			t.Fatalf("the server stopped before it was ready: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("the server is not ready after %s", hangAfter)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		require.NoError(t, err)
	}
	return home, big
}

// TestDoctorHomeLimit: doctor reads a home's config files with the limit
// its server reads them with, as the server's start recorded it: a valid
// 2 MiB file of a server that reads up to 4 MiB is no finding, and
// doctor --fix leaves it where it is.
func TestDoctorHomeLimit(t *testing.T) {
	home, big := limitedHome(t, 4<<20)
	path := filepath.Join(home, "config", bigName)
	for _, m := range modes {
		for _, fix := range [][]string{nil, {"--fix"}} {
			r := mcpkeep(t, append(append([]string{"doctor", "--home", home}, fix...), m.args...)...)
			assert.Equal(t, exitOK, r.code, "doctor %v: %s%s", fix, r.stdout, r.stderr)
			assert.NotContains(t, findings(t, m.args != nil, r), recovery.KindRefusedFile, "doctor %v", fix)
			data, err := os.ReadFile(path)
			require.NoError(t, err)
			assert.Equal(t, big, data, "doctor %v leaves the file in place", fix)
		}
	}
}

// TestStatusHomeLimit: status shows the limit a home's server reads with
// when it is not the default, and reads the config with it: a 2 MiB file
// of a server that reads up to 4 MiB is no problem.
func TestStatusHomeLimit(t *testing.T) {
	home, _ := limitedHome(t, 4<<20)
	r := mcpkeep(t, "status", "--home", home)
	require.Equal(t, exitOK, r.code, r.stdout+r.stderr)
	assert.Contains(t, r.stdout, "files:     config files of up to 4 MiB (the server's Options.MaxFileSize at its last start)\n")
	assert.Contains(t, r.stdout, "config:    HEAD ")
	r = mcpkeep(t, "status", "--home", home, "--json")
	require.Equal(t, exitOK, r.code, r.stderr)
	got := decode[statusOut](t, r)
	assert.Equal(t, int64(4<<20), got.MaxFileSize)
	require.NotNil(t, got.Config)
	assert.False(t, got.Config.Dirty)

	def := installed(t) // helios, at the default limit
	r = mcpkeep(t, "status", "--home", def)
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.NotContains(t, r.stdout, "files:", "the default is not shown")
	assert.NotContains(t, mcpkeep(t, "status", "--home", def, "--json").stdout, "max_file_size")
}

// TestHistoryAndRollbackHomeLimit: history and rollback read a home's
// config with the limit its server reads with: rollback commits a tree
// that holds a 2 MiB file, which the default limit refuses.
func TestHistoryAndRollbackHomeLimit(t *testing.T) {
	home, big := limitedHome(t, 4<<20)
	path := filepath.Join(home, "config", bigName)
	require.NoError(t, os.WriteFile(path, bigYAML(3<<20), 0o600))
	env, closeEnv, err := lifecycle.OpenHome(home, nil)
	require.NoError(t, err)
	assert.Equal(t, int64(4<<20), env.MaxFileSize)
	_, err = env.Store.Commit("grow big.yaml")
	require.NoError(t, closeEnv())
	require.NoError(t, err, "a 3 MiB file is within the home's limit")

	r := mcpkeep(t, "history", "--home", home, bigName)
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Equal(t, 2, strings.Count(r.stdout, "\n"), r.stdout)
	r = mcpkeep(t, "rollback", "--home", home, "HEAD~1")
	require.Equal(t, exitOK, r.code, r.stderr)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, big, data, "rolled back to the 2 MiB version")
}

// TestSyncHomeLimit: sync takes in the remote's changes with the limit
// the home's server reads with: a 3 MiB version of a file, committed on
// another host, reaches the home of a server that reads up to 4 MiB.
func TestSyncHomeLimit(t *testing.T) {
	home, _ := limitedHome(t, 4<<20)
	url := gitremote.FileURL(gitremote.Bare(t))
	r := mcpkeep(t, "sync", "--home", home, "--remote", url)
	require.Equal(t, exitOK, r.code, r.stdout+r.stderr)

	other := filepath.Join(t.TempDir(), "other")
	gitCLI(t, filepath.Dir(other), "clone", "--branch", "main", url, other)
	grown := bigYAML(3 << 20)
	require.NoError(t, os.WriteFile(filepath.Join(other, bigName), grown, 0o600))
	gitCLI(t, other, "commit", "-am", "grow big.yaml")
	gitCLI(t, other, "push", "origin", "main")

	r = mcpkeep(t, "sync", "--home", home, "--remote", url)
	require.Equal(t, exitOK, r.code, r.stdout+r.stderr)
	data, err := os.ReadFile(filepath.Join(home, "config", bigName))
	require.NoError(t, err)
	assert.Equal(t, grown, data, "the 3 MiB version came in")
}
