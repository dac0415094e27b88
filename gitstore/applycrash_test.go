package gitstore_test

import (
	"bufio"
	"context"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/atomicfile"
	"github.com/mcpkeep/mcpkeep/crashtest"
	"github.com/mcpkeep/mcpkeep/gitstore"
	"github.com/mcpkeep/mcpkeep/internal/failpoint"
)

const applyDirEnv = "GITSTORE_APPLY_DIR"

// changePathPoint reports whether failpoint n is on the change path
// (Apply and the flush), which a loop of Commit never reaches.
func changePathPoint(n string) bool {
	return slices.Contains([]string{"gitstore.before-intent", "gitstore.after-intent", "gitstore.before-barrier-2",
		"gitstore.flush-after-pack", "gitstore.flush-after-ref"}, n)
}

// The files every batch of the apply loop writes, all with the batch's
// number: after any crash they must all hold the same one.
var batchFiles = []string{"a.yaml", "b.yaml", "sub/deep/c.yaml", "sub/d.yaml"}

// TestHelperApplyLoop is the child of TestCrashApplyLoop: three writers
// change the repository through Stage and Staged.Wait forever, with
// Maintain flushing and packing beside them, each printing its commit's
// hash once Wait returned. Commit n writes n into every file of batchFiles
// and writes or removes extra.yaml by n's parity.
func TestHelperApplyLoop(t *testing.T) {
	dir := os.Getenv(applyDirEnv)
	if dir == "" {
		return
	}
	fail := func(err error) {
		fmt.Println("error", err)
		os.Exit(1)
	}
	s, err := gitstore.Init(dir, &gitstore.Options{HoldsLock: true, PackThreshold: 100})
	if err != nil {
		fail(err)
	}
	gitstore.SetPackIdle(20 * time.Millisecond) // packs in the loop's quiet spells
	go s.Maintain(context.Background())
	head, _ := s.Head()
	n := 0
	if head != "" {
		b, err := os.ReadFile(filepath.Join(dir, "a.yaml"))
		if err != nil {
			fail(err)
		}
		n, _ = strconv.Atoi(strings.TrimPrefix(strings.TrimSpace(string(b)), "n: "))
	}
	// Three writers at once, as a server's sessions: they take turns to
	// stage, and share the Apply of whichever waits first, so that a
	// batch's first barrier overlaps the last one's second.
	var turn, print sync.Mutex
	var pause sync.RWMutex // a quiet spell every 30 commits: Maintain flushes, then packs
	out := bufio.NewWriter(os.Stdout)
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			for {
				pause.RLock()
				turn.Lock()
				n++
				quiet := n%30 == 0
				var changes []gitstore.Change
				for _, f := range batchFiles {
					changes = append(changes, gitstore.Change{Path: f, Data: fmt.Appendf(nil, "n: %d\n", n)})
				}
				changes = append(changes, gitstore.Change{Path: "extra.yaml", Data: fmt.Appendf(nil, "n: %d\n", n), Remove: n%2 == 0})
				c, err := s.Stage(fmt.Sprintf("batch %d", n), changes)
				turn.Unlock()
				if err != nil {
					fail(err)
				}
				if err := c.Wait(); err != nil {
					fail(err)
				}
				print.Lock()
				fmt.Fprintln(out, c.Hash())
				out.Flush()
				print.Unlock()
				pause.RUnlock()
				if quiet {
					pause.Lock()
					time.Sleep(60 * time.Millisecond)
					pause.Unlock()
				}
			}
		})
	}
	wg.Wait()
}

// TestCrashApplyLoop SIGKILLs a child changing the repository through
// Stage and Apply at every point of the change path (gitstore's, and
// atomicfile's within it, at the Nth hit) and at random, and checks after
// each kill that the next Open leaves every acknowledged commit in the
// history (seen by the git CLI), a work tree equal to HEAD, which holds
// whole batches only, and a repository git fsck --strict accepts.
func TestCrashApplyLoop(t *testing.T) {
	var points []string
	for _, n := range failpoint.Names {
		if changePathPoint(n) || strings.HasPrefix(n, "atomicfile.") || n == "gitstore.before-pack" || n == "gitstore.after-pack" {
			points = append(points, n)
		}
	}
	kills := 3 * len(points)
	if os.Getenv("MCPKEEP_LONG") != "" {
		kills = 300
	} else if testing.Short() {
		kills = len(points) + 4
	}
	seed, err := crashtest.SeedFromEnv()
	require.NoError(t, err)
	t.Logf("seed %d (replay: %s=%d)", seed, crashtest.SeedEnvVar, seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 11))
	dir := t.TempDir()
	var acked []string
	fired := map[string]bool{}
	for i := range kills {
		env := ""
		if i < len(points) || i%2 == 0 {
			p := points[i%len(points)]
			n := 1 + rng.IntN(6)
			if strings.Contains(p, "pack") || strings.Contains(p, "flush") {
				n = 1
			}
			env = fmt.Sprintf("%s=kill@%d", p, n)
		}
		got, byPoint := runApplyUntilKilled(t, dir, env, rng)
		acked = append(acked, got...)
		if byPoint {
			fired[strings.Split(env, "=")[0]] = true
		}
		what := fmt.Sprintf("kill %d (%s), seed %d", i, env, seed)

		// As recovery.Run does at a start: the temporary files of the
		// work tree a kill left go (gitstore removes those in .git).
		cleanWorkTemps(t, dir)
		s, err := gitstore.Open(dir, &gitstore.Options{HoldsLock: true})
		require.NoError(t, err, what)
		head, err := s.Head()
		require.NoError(t, err, what)
		dirty, err := s.Dirty()
		require.NoError(t, err, what)
		assert.False(t, dirty, "%s: the work tree is HEAD's", what)
		require.NoError(t, s.Close(), what)
		checkWholeBatches(t, dir, what)
		if head == "" {
			require.Empty(t, acked, "%s: no HEAD, yet commits were acknowledged", what)
			continue // killed before the first commit
		}
		git(t, dir, "fsck", "--full", "--strict")
		assert.Equal(t, head, strings.TrimSpace(git(t, dir, "rev-parse", "HEAD")), what)
		log := map[string]bool{}
		for h := range strings.FieldsSeq(git(t, dir, "rev-list", "HEAD")) {
			log[h] = true
		}
		for _, h := range acked {
			require.True(t, log[h], "%s: acknowledged commit %s lost", what, h)
		}
		assert.Empty(t, git(t, dir, "status", "--porcelain"), what)
	}
	for _, p := range points {
		assert.True(t, fired[p], "failpoint %s never killed the child", p)
	}
	t.Logf("%d kills, %d acknowledged commits, all present, every batch whole", kills, len(acked))
}

// checkWholeBatches requires every file of the work tree to hold the same
// batch number, with extra.yaml there for odd numbers only.
func checkWholeBatches(t *testing.T, dir, what string) {
	t.Helper()
	first := read(t, dir, batchFiles[0])
	if first == "<none>" {
		return // killed before the first batch
	}
	for _, f := range batchFiles[1:] {
		assert.Equal(t, first, read(t, dir, f), "%s: %s and %s from different batches", what, batchFiles[0], f)
	}
	n, err := strconv.Atoi(strings.TrimPrefix(strings.TrimSpace(first), "n: "))
	require.NoError(t, err, what)
	want := "<none>"
	if n%2 == 1 {
		want = first
	}
	assert.Equal(t, want, read(t, dir, "extra.yaml"), "%s: extra.yaml", what)
}

// runApplyUntilKilled runs the apply loop with failpoints env until it
// dies: by the failpoint, or by SIGKILL after a random number of batches
// and a random delay. It returns the acknowledged hashes, and whether the
// failpoint killed it.
func runApplyUntilKilled(t *testing.T, dir, env string, rng *rand.Rand) ([]string, bool) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperApplyLoop$")
	cmd.Env = append(os.Environ(), applyDirEnv+"="+dir, failpoint.EnvVar+"="+env)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	sc := bufio.NewScanner(stdout)
	var acked []string
	killAfter := 1 + rng.IntN(40)
	delay := time.Duration(rng.IntN(2000)) * time.Microsecond
	deadline := time.AfterFunc(time.Minute, func() { cmd.Process.Kill() }) // a point that never fires
	defer deadline.Stop()
	killed := false
	for sc.Scan() {
		line := sc.Text()
		require.False(t, strings.HasPrefix(line, "error"), "child: %s", line)
		acked = append(acked, line)
		if env == "" && len(acked) == killAfter {
			time.Sleep(delay)
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

// cleanWorkTemps removes the temporary files of interrupted writes from
// the work tree of dir, as recovery.Run does.
func cleanWorkTemps(t *testing.T, dir string) {
	t.Helper()
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Name() == ".git" {
			return filepath.SkipDir
		}
		if d.IsDir() {
			_, err = atomicfile.CleanTemps(p)
		}
		return err
	}))
}
