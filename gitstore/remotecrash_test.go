package gitstore_test

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/crashtest"
	"github.com/mcpkeep/mcpkeep/gitstore"
	"github.com/mcpkeep/mcpkeep/internal/failpoint"
	"github.com/mcpkeep/mcpkeep/internal/testserver/gitremote"
)

const (
	remoteDirEnv = "GITSTORE_REMOTE_DIR"
	remoteURLEnv = "GITSTORE_REMOTE_URL"
)

// TestHelperRemoteLoop is the child of TestCrashRemote: a store in sync
// mode fetches (a merge with a conflict, which the parent prepared on the
// remote), then changes x.yaml forever, printing each commit's hash once
// Wait returned: acknowledged, so on the remote and durable here.
func TestHelperRemoteLoop(t *testing.T) {
	dir := os.Getenv(remoteDirEnv)
	if dir == "" {
		return
	}
	fail := func(err error) {
		fmt.Println("error", err)
		os.Exit(1)
	}
	s, err := gitstore.Open(dir, &gitstore.Options{HoldsLock: true})
	if err != nil {
		fail(err)
	}
	r, err := gitstore.NewRemote(s, &gitstore.RemoteOptions{URL: os.Getenv(remoteURLEnv), Mode: gitstore.RemoteSync,
		Credentials: &gitstore.Credentials{}})
	if err != nil {
		fail(err)
	}
	if _, err := r.Fetch(t.Context()); err != nil {
		fail(err)
	}
	out := bufio.NewWriter(os.Stdout)
	for n := 0; ; n++ {
		c, err := s.Stage(fmt.Sprintf("child %d", n), []gitstore.Change{{Path: "mine.yaml", Data: fmt.Appendf(nil, "n: %d %d\n", os.Getpid(), n)}})
		if err != nil {
			fail(err)
		}
		if err := c.Wait(); err != nil {
			fail(err)
		}
		fmt.Fprintln(out, c.Hash())
		out.Flush()
	}
}

// remotePoints are the failpoints only a fetch, a merge or a push reaches:
// a loop of local commits never fires them.
var remotePoints = []string{"gitstore.fetch-after-pack", "gitstore.merge-after-tag", "gitstore.push-after-remote"}

// TestCrashRemote SIGKILLs a store in sync mode at each failpoint of a
// remote (the fetch's pack written, the conflict tag written, a push the
// remote took before anything here is durable), at the change path's
// points as a merge or a fast-forward goes through them, and at random;
// after each kill the next Open and Sync must leave a repository and a
// remote git fsck accepts, with every acknowledged commit in both, the
// same HEAD on both, and the work tree equal to HEAD.
func TestCrashRemote(t *testing.T) {
	gitremote.Git(t)
	points := append(slices.Clone(remotePoints),
		"gitstore.before-intent", "gitstore.after-intent", "gitstore.before-barrier-2")
	kills := 2 * len(points)
	if os.Getenv("MCPKEEP_LONG") != "" {
		kills = 60
	} else if testing.Short() {
		kills = len(points)
	}
	seed, err := crashtest.SeedFromEnv()
	require.NoError(t, err)
	t.Logf("seed %d (replay: %s=%d)", seed, crashtest.SeedEnvVar, seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 15))

	bare := gitremote.Bare(t)
	url := gitremote.FileURL(bare)
	other := home(t, map[string]string{"x.yaml": "x: 0\n"})
	ro := attach(t, other, url, nil)
	require.NoError(t, ro.Push(t.Context()))
	dir := t.TempDir()
	s, err := gitstore.Init(dir, &gitstore.Options{HoldsLock: true})
	require.NoError(t, err)
	r := attach(t, s, url, nil)
	_, err = r.Fetch(t.Context())
	require.NoError(t, err)
	require.NoError(t, r.Close())
	require.NoError(t, s.Close())

	var acked []string
	fired := map[string]bool{}
	for i := range kills {
		// The other writer changes x.yaml, which the child changed
		// too after its last merge (its first run: a fast-forward).
		_, err := ro.Fetch(t.Context())
		require.NoError(t, err)
		change(t, other, fmt.Sprintf("other %d", i), map[string]string{"x.yaml": fmt.Sprintf("x: other %d\n", i)})
		require.NoError(t, ro.Push(t.Context()))
		if i > 0 {
			s, err := gitstore.Open(dir, &gitstore.Options{HoldsLock: true})
			require.NoError(t, err)
			c, err := s.Stage("local x", []gitstore.Change{{Path: "x.yaml", Data: fmt.Appendf(nil, "x: local %d\n", i)}})
			require.NoError(t, err)
			require.NoError(t, c.Wait(), "no remote attached: a local change")
			require.NoError(t, s.Close())
		}
		env := ""
		if i < len(points) || i%2 == 0 {
			env = points[i%len(points)] + "=kill"
		}
		got, byPoint := runRemoteUntilKilled(t, dir, url, env, rng)
		acked = append(acked, got...)
		if byPoint {
			fired[strings.Split(env, "=")[0]] = true
		}
		what := fmt.Sprintf("kill %d (%s), seed %d", i, env, seed)

		cleanWorkTemps(t, dir)
		s, err := gitstore.Open(dir, &gitstore.Options{HoldsLock: true})
		require.NoError(t, err, what)
		dirty, err := s.Dirty()
		require.NoError(t, err, what)
		assert.False(t, dirty, "%s: the work tree is HEAD's", what)
		r := attach(t, s, url, nil)
		_, err = r.Sync(t.Context())
		require.NoError(t, err, what)
		h := head(t, s)
		require.NoError(t, r.Close())
		require.NoError(t, s.Close())
		fsck(t, dir)
		fsck(t, bare)
		assert.Equal(t, h, strings.TrimSpace(gitremote.Run(t, bare, "rev-parse", "main")), "%s: one history after a sync", what)
		local := map[string]bool{}
		for c := range strings.FieldsSeq(git(t, dir, "rev-list", "HEAD")) {
			local[c] = true
		}
		for _, c := range acked {
			require.True(t, local[c], "%s: acknowledged commit %s lost", what, c)
		}
		assert.Empty(t, git(t, dir, "status", "--porcelain"), what)
		for _, line := range strings.Split(strings.TrimSpace(git(t, dir, "tag", "-l", "conflicts/*")), "\n") {
			if line != "" {
				git(t, dir, "cat-file", "-e", line+"^{commit}")
			}
		}
	}
	for _, p := range points {
		assert.True(t, fired[p], "failpoint %s never killed the child", p)
	}
	t.Logf("%d kills, %d acknowledged commits, all present here and on the remote", kills, len(acked))
}

// runRemoteUntilKilled runs the remote loop with failpoints env until it
// dies, by the failpoint or by SIGKILL after a few commits. It returns
// the acknowledged hashes, and whether the failpoint killed it.
func runRemoteUntilKilled(t *testing.T, dir, url, env string, rng *rand.Rand) ([]string, bool) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperRemoteLoop$")
	cmd.Env = append(os.Environ(), remoteDirEnv+"="+dir, remoteURLEnv+"="+url, failpoint.EnvVar+"="+env)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	sc := bufio.NewScanner(stdout)
	var acked []string
	killAfter := 1 + rng.IntN(5)
	deadline := time.AfterFunc(time.Minute, func() { cmd.Process.Kill() })
	defer deadline.Stop()
	killed := false
	for sc.Scan() {
		line := sc.Text()
		require.False(t, strings.HasPrefix(line, "error"), "child: %s", line)
		acked = append(acked, line)
		if len(acked) == killAfter && !killed {
			cmd.Process.Kill()
			killed = true
		}
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, "the child must die by SIGKILL (failpoint %q)", env)
	ws := ee.Sys().(syscall.WaitStatus)
	require.True(t, ws.Signaled() && ws.Signal() == syscall.SIGKILL, "child exit: %v (failpoint %q)", err, env)
	return acked, env != "" && !killed && deadline.Stop()
}
