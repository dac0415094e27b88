package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/atomicfile"
	"github.com/mcpkeep/mcpkeep/cmd/internal/helios"
	"github.com/mcpkeep/mcpkeep/crashtest"
	"github.com/mcpkeep/mcpkeep/internal/testserver/etcdtest"
	"github.com/mcpkeep/mcpkeep/internal/testserver/gitremote"
	"github.com/mcpkeep/mcpkeep/statefile"
)

// remoteCluster is two hosts under one etcd sharing one git remote in
// sync mode, served over HTTP. Host a is the first writer; b joins as a
// standby with a clone of the remote as its home's config
// (TestTwoHostsOwnInstallTakesOver has b installed on its own).
type remoteCluster struct {
	bare string
	a, b *host
}

func startRemoteCluster(t *testing.T, failpointsA string) *remoteCluster {
	t.Helper()
	return startRemoteClusterB(t, failpointsA, false)
}

// startRemoteClusterB is startRemoteCluster where b's home, a clone of
// the remote, has a commit of its own the remote lacks when own is set.
func startRemoteClusterB(t *testing.T, failpointsA string, own bool) *remoteCluster {
	t.Helper()
	srv := etcdtest.Start(t, nil)
	bare := gitremote.Bare(t)
	flags := []string{"--remote", gitremote.Serve(t, bare, nil).URL(), "--remote-mode", "sync", "--remote-interval", "200ms"}
	start := func(root, name, failpoints string) *host {
		h, err := startHostNoCleanup(t, root, name, srv.URL, failpoints, flags...)
		require.NoError(t, err)
		t.Cleanup(h.stop)
		h.st = h.ready(t)
		return h
	}
	c := &remoteCluster{bare: bare}
	c.a = start(t.TempDir(), "a", failpointsA)
	c.a.waitRole(t, statefile.RoleActive)
	acked, answer := update(t, connectHTTP(t, c.a.st), "k0", "a")
	require.True(t, acked, answer)
	root := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "b", ".helios"), 0o700))
	config := filepath.Join(root, "b", ".helios", "config")
	gitremote.Run(t, root, "clone", "-q", bare, config)
	if own {
		gitremote.Run(t, config, "commit", "-q", "--allow-empty", "-m", "b's own commit")
	}
	c.b = start(root, "b", "")
	c.b.waitRole(t, statefile.RoleStandby)
	return c
}

// prefs reads the preferences of the default persona in h's work tree.
func prefs(t *testing.T, h *host) map[string]string {
	t.Helper()
	var p helios.Persona
	require.NoError(t, atomicfile.ReadYAMLStrict(filepath.Join(h.home, "config", "personas", "default.yaml"), &p))
	return p.Preferences
}

// fsckAll checks both homes' repositories and the remote with the git
// CLI, strictly.
func (c *remoteCluster) fsckAll(t *testing.T) {
	t.Helper()
	for _, dir := range []string{filepath.Join(c.a.home, "config"), filepath.Join(c.b.home, "config"), c.bare} {
		gitremote.Run(t, dir, "fsck", "--full", "--strict", "--no-dangling")
	}
}

// TestTwoHostsEtcdAndRemote is issue 15's acceptance for both halves at
// once: two hosts under one etcd, one git remote over HTTP in sync mode.
// Only one is active at any moment; SIGKILL the active and the standby
// takes over with every change the old writer acknowledged, and pushes
// its own; git fsck is clean on both homes and on the remote.
func TestTwoHostsEtcdAndRemote(t *testing.T) {
	c := startRemoteCluster(t, "")
	s := sample(c.a, c.b)
	ca := connectHTTP(t, c.a.st)
	want := map[string]string{"k0": "a"}
	for i := 1; i <= 3; i++ {
		k := fmt.Sprintf("k%d", i)
		acked, answer := update(t, ca, k, "a")
		require.True(t, acked, answer)
		want[k] = "a"
	}
	killed := time.Now()
	require.NoError(t, c.a.Kill())
	c.a.Wait()
	c.b.waitRole(t, statefile.RoleActive)
	t.Logf("standby active %v after the active writer's SIGKILL (TTL %v)", time.Since(killed).Round(time.Millisecond), etcdTTL)
	got := prefs(t, c.b)
	for k, v := range want {
		assert.Equal(t, v, got[k], "the new writer lacks the acknowledged change %s=%s", k, v)
	}
	acked, answer := update(t, connectHTTP(t, c.b.st), "k4", "b")
	require.True(t, acked, answer)
	t.Logf("first change acknowledged by the new writer %v after the SIGKILL", time.Since(killed).Round(time.Millisecond))
	s.check(t)
	assert.Contains(t, gitremote.Run(t, c.bare, "show", "main:personas/default.yaml"), "k4",
		"sync mode: the change the new writer acknowledged is on the remote")
	remote := strings.TrimSpace(gitremote.Run(t, c.bare, "rev-parse", "main"))
	c.b.poll(t, "the new writer's HEAD on disk at the remote's tip", func() bool {
		return strings.TrimSpace(git(t, filepath.Join(c.b.home, "config"), "rev-parse", "HEAD")) == remote
	})
	c.fsckAll(t)
}

// TestTwoHostsOwnInstallTakesOver: host b, installed on its own (its
// home's history unrelated to the remote's), changes the file a changes,
// then joins as a standby and takes over after a's SIGKILL. Its catch-up
// merge takes the remote's version of the file both changed (sync mode:
// the remote has every acknowledged change), so b's files hold every
// change a acknowledged, and b's own version is in a conflicts/<time>
// tag on b's commit; git fsck is clean on both homes and on the remote.
func TestTwoHostsOwnInstallTakesOver(t *testing.T) {
	srv := etcdtest.Start(t, nil)
	bare := gitremote.Bare(t)
	flags := []string{"--remote", gitremote.Serve(t, bare, nil).URL(), "--remote-mode", "sync", "--remote-interval", "200ms"}
	root := t.TempDir()
	dir := filepath.Join(root, "b")
	home, registry := filepath.Join(dir, ".helios"), filepath.Join(dir, "servers.json")
	p, err := crashtest.Start(t.Context(), crashtest.Cmd{Path: heliosBin,
		Args: []string{"--home", home, "--registry", registry, "--http", "127.0.0.1:0", "--no-stdio"}, Env: []string{"HOME=" + dir}})
	require.NoError(t, err)
	solo := &server{Process: p, home: home, registry: registry}
	t.Cleanup(solo.stop)
	acked, answer := update(t, connectHTTP(t, solo.ready(t)), "kb", "b")
	require.True(t, acked, answer)
	solo.stop()

	start := func(root, name string) *host {
		h, err := startHostNoCleanup(t, root, name, srv.URL, "", flags...)
		require.NoError(t, err)
		t.Cleanup(h.stop)
		h.st = h.ready(t)
		return h
	}
	a := start(t.TempDir(), "a")
	a.waitRole(t, statefile.RoleActive)
	ca := connectHTTP(t, a.st)
	want := map[string]string{}
	for i := range 3 {
		k := fmt.Sprintf("k%d", i)
		acked, answer := update(t, ca, k, "a")
		require.True(t, acked, answer)
		want[k] = "a"
	}
	b := start(root, "b")
	b.waitRole(t, statefile.RoleStandby)
	require.NoError(t, a.Kill())
	a.Wait()
	b.waitRole(t, statefile.RoleActive)
	got := prefs(t, b)
	for k, v := range want {
		assert.Equal(t, v, got[k], "the new writer lacks the acknowledged change %s=%s", k, v)
	}
	config := filepath.Join(b.home, "config")
	tags := strings.Fields(git(t, config, "tag", "-l", "conflicts/*"))
	require.Len(t, tags, 1, "b's catch-up merge tags b's own version")
	assert.Contains(t, git(t, config, "show", tags[0]+":personas/default.yaml"), "kb", "b's own version, through the tag")
	acked, answer = update(t, connectHTTP(t, b.st), "k9", "b")
	require.True(t, acked, answer)
	merge := gitremote.Run(t, bare, "log", "-1", "--format=%B", "--merges", "main")
	assert.Contains(t, merge, "Conflict: personas/default.yaml", "the pushed catch-up merge records the conflict")
	assert.Contains(t, merge, "Kept: remote")
	show := gitremote.Run(t, bare, "show", "main:personas/default.yaml")
	for _, k := range []string{"k0", "k1", "k2", "k9"} {
		assert.Contains(t, show, k, "the remote lacks the acknowledged change %s", k)
	}
	out, code := mcpkeep(t, dir, "doctor", "--home", b.home)
	assert.Equal(t, 1, code, "doctor finds the conflict: %s", out)
	assert.Contains(t, out, "merge-conflict config/personas/default.yaml")
	assert.Contains(t, out, "kept the remote's version; this home's is in tag "+tags[0])
	out, code = mcpkeep(t, dir, "sync", "--home", b.home)
	assert.Equal(t, 3, code, "sync beside a live server: %s", out)
	assert.Contains(t, out, "conflict:  personas/default.yaml: changed on both sides, the remote's version kept; this home's:")
	for _, d := range []string{filepath.Join(a.home, "config"), config, bare} {
		gitremote.Run(t, d, "fsck", "--full", "--strict", "--no-dangling")
	}
}

// TestEtcdFencingRemote is the fencing acceptance with the git remote in
// sync mode: the active writer is stopped (SIGSTOP) past its lease with
// a change in flight; the standby takes over and writes; continued, the
// old writer acknowledges none of its later changes, and the remote's
// history keeps every acknowledged change.
func TestEtcdFencingRemote(t *testing.T) {
	// The second change of a (k0 is the first) sleeps before its answer.
	c := startRemoteCluster(t, "lifecycle.before-ack=sleep(5s)@2")
	s := sample(c.a, c.b)
	ca := connectHTTP(t, c.a.st)
	done := make(chan bool, 1)
	go func() {
		acked, answer := update(t, ca, "a-in-flight", "a")
		t.Logf("the old writer answered a-in-flight: %s", answer)
		done <- acked
	}()
	c.a.poll(t, "the change in flight committed", func() bool { return changes(t, c.a.home) == 2 })
	require.NoError(t, syscall.Kill(c.a.Pid(), syscall.SIGSTOP))
	stopped := true
	defer func() {
		if stopped {
			syscall.Kill(c.a.Pid(), syscall.SIGCONT)
		}
	}()
	c.b.waitRole(t, statefile.RoleActive)
	acked, answer := update(t, connectHTTP(t, c.b.st), "b-after", "b")
	require.True(t, acked, answer)
	require.NoError(t, syscall.Kill(c.a.Pid(), syscall.SIGCONT))
	stopped = false
	assert.False(t, <-done, "the old writer acknowledged the change in flight after losing its lease")
	for i := range 2 {
		acked, answer := update(t, ca, fmt.Sprintf("a-after-%d", i), "a")
		t.Logf("the old writer answered a-after-%d: %s", i, answer)
		assert.False(t, acked, "the old writer acknowledged a change after losing its lease: %s", answer)
	}
	c.a.waitRole(t, statefile.RoleStandby)
	// Every acknowledged change is in the remote's last commit.
	show := gitremote.Run(t, c.bare, "show", "main:personas/default.yaml")
	for _, k := range []string{"k0", "b-after"} {
		assert.Contains(t, show, k, "the remote lost the acknowledged change %s", k)
	}
	assert.NotContains(t, show, "a-after", "a change the old writer did not acknowledge is on the remote")
	s.check(t)
	c.fsckAll(t)
}

// TestStandbyNeverPushes: a standby whose home has a commit the remote
// lacks fetches without pushing it, so the active writer's next
// sync-mode change is not refused as "another writer moved the remote",
// and the remote's history has none of the standby's own commits.
func TestStandbyNeverPushes(t *testing.T) {
	c := startRemoteClusterB(t, "", true)
	own := strings.TrimSpace(git(t, filepath.Join(c.b.home, "config"), "rev-parse", "HEAD"))
	// b's remote loop pushes, if it does, right after its first fetch,
	// before the next (every 200 ms): wait for a later one.
	first := c.b.st.Remote.LastFetch
	c.b.poll(t, "b's remote loop to fetch again", func() bool {
		st, err := statefile.Read(filepath.Join(c.b.home, statefile.FileName))
		return err == nil && st.Remote != nil && st.Remote.LastFetch.After(first)
	})
	acked, answer := update(t, connectHTTP(t, c.a.st), "k1", "a")
	assert.True(t, acked, "the writer's change after a standby's catch-up: %s", answer)
	log := gitremote.Run(t, c.bare, "log", "--format=%H", "main")
	assert.NotContains(t, log, own, "the standby pushed its own commit to the remote")
	c.fsckAll(t)
}
