package gitstore_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing/format/index"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/crashtest"
	"github.com/mcpkeep/mcpkeep/gitstore"
	"github.com/mcpkeep/mcpkeep/internal/failpoint"
)

const crashDirEnv = "GITSTORE_CRASH_DIR"

// TestHelperCommitLoop is the child of the crash test: it opens the
// repository (as the lock holder would) and commits forever, printing each
// hash only after Commit returned.
func TestHelperCommitLoop(t *testing.T) {
	dir := os.Getenv(crashDirEnv)
	if dir == "" {
		return
	}
	s, err := gitstore.Init(dir, &gitstore.Options{HoldsLock: true, PackThreshold: 40})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	out := bufio.NewWriter(os.Stdout)
	for i := 0; ; i++ {
		name := filepath.Join(dir, fmt.Sprintf("f%d.yaml", i%7))
		if i%11 == 10 {
			os.Remove(name)
		} else if err := os.WriteFile(name, fmt.Appendf(nil, "n: %d\n", i), 0o600); err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		h, err := s.Commit(fmt.Sprintf("step %d", i))
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		if h != "" {
			fmt.Fprintln(out, h)
			out.Flush()
		}
	}
}

// TestCrashCommitLoop SIGKILLs a committing child at every gitstore
// failpoint and at random moments, and checks after each kill that the
// branch ref holds a hash and the index decodes (before any repair), and
// that the repository opens, commits, holds every acknowledged commit and
// passes git fsck --full --strict.
func TestCrashCommitLoop(t *testing.T) {
	// gitstore's points, and atomicfile's: a commit writes its objects,
	// then its ref, stamp and index, each set in one atomicfile.WriteFiles,
	// and kill@N at atomicfile.before-rename lands between any two renames.
	var points []string
	for _, n := range failpoint.Names {
		if (strings.HasPrefix(n, "gitstore.") || strings.HasPrefix(n, "atomicfile.")) && !changePathPoint(n) && !slices.Contains(remotePoints, n) {
			points = append(points, n)
		}
	}
	// The acceptance run is 300 kills (MCPKEEP_LONG=1, under a minute on
	// 2 cores); the default run is shorter so go test ./... stays quick.
	// Every other kill is at a failpoint: the short run arms each once.
	kills := 40
	if os.Getenv("MCPKEEP_LONG") != "" {
		kills = 300
	} else if testing.Short() {
		kills = 2 * len(points)
	}
	seed, err := crashtest.SeedFromEnv()
	require.NoError(t, err)
	t.Logf("seed %d (replay: %s=%d)", seed, crashtest.SeedEnvVar, seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 7))
	dir := t.TempDir()
	var acked []string
	byPoint := map[string]int{}
	for i := range kills {
		var env string
		if i%2 == 0 {
			p := points[(i/2)%len(points)]
			n := 1 + rng.IntN(8)
			if p == "gitstore.before-pack" {
				n = 1
			}
			env = fmt.Sprintf("%s=kill@%d", p, n)
			byPoint[p]++
		}
		acked = append(acked, runUntilKilled(t, dir, env, rng)...)
		if i > 0 || len(acked) > 0 {
			// What the kill left, before Open repairs anything: go-git
			// alone left empty refs and truncated indexes here.
			checkRefAndIndex(t, dir, fmt.Sprintf("kill %d (%s), seed %d", i, env, seed))
		}

		s, err := gitstore.Open(dir, &gitstore.Options{HoldsLock: true})
		require.NoError(t, err, "kill %d (%s), seed %d", i, env, seed)
		require.NoError(t, os.WriteFile(filepath.Join(dir, "after.yaml"), fmt.Appendf(nil, "k: %d\n", i), 0o600))
		_, err = s.Commit("after kill")
		require.NoError(t, err, "kill %d (%s), seed %d", i, env, seed)
		s.Close()
		checkRepo(t, dir, acked, seed)
	}
	for _, p := range points {
		assert.Positive(t, byPoint[p], "failpoint %s never armed", p)
	}
	t.Logf("%d kills, %d acknowledged commits, all present", kills, len(acked))
}

// runUntilKilled runs the child with failpoints env until it dies: by the
// failpoint, or by SIGKILL after a random number of commits and a random
// delay. It returns the acknowledged hashes.
func runUntilKilled(t *testing.T, dir, env string, rng *rand.Rand) []string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperCommitLoop$")
	cmd.Env = append(os.Environ(), crashDirEnv+"="+dir, failpoint.EnvVar+"="+env)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	sc := bufio.NewScanner(stdout)
	var acked []string
	killAfter := 1 + rng.IntN(12)
	delay := time.Duration(rng.IntN(3000)) * time.Microsecond
	for sc.Scan() {
		line := sc.Text()
		require.False(t, strings.HasPrefix(line, "error"), "child: %s", line)
		acked = append(acked, line)
		if env == "" && len(acked) == killAfter {
			time.Sleep(delay) // the crash schedule: land anywhere in the next commit
			cmd.Process.Kill()
		}
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, "the child must die by SIGKILL (failpoint %q)", env)
	ws := ee.Sys().(syscall.WaitStatus)
	require.True(t, ws.Signaled() && ws.Signal() == syscall.SIGKILL, "child exit: %v (failpoint %q)", err, env)
	return acked
}

func checkRepo(t *testing.T, dir string, acked []string, seed int64) {
	t.Helper()
	git(t, dir, "fsck", "--full", "--strict")
	log := map[string]bool{}
	for h := range strings.FieldsSeq(git(t, dir, "rev-list", "HEAD")) {
		log[h] = true
	}
	for _, h := range acked {
		require.True(t, log[h], "acknowledged commit %s lost (seed %d)", h, seed)
	}
	ref, err := os.ReadFile(filepath.Join(dir, ".git", "refs", "heads", "main"))
	require.NoError(t, err)
	require.Len(t, strings.TrimSpace(string(ref)), 40, "branch ref is a hash")
	assert.Empty(t, git(t, dir, "status", "--porcelain"))
}

// checkRefAndIndex requires the branch ref to hold a commit hash and the
// index to decode.
func checkRefAndIndex(t *testing.T, dir, what string) {
	t.Helper()
	ref, err := os.ReadFile(filepath.Join(dir, ".git", "refs", "heads", "main"))
	require.NoError(t, err, what)
	require.Regexp(t, "^[0-9a-f]{40}\n$", string(ref), "%s left the branch ref empty or garbage", what)
	b, err := os.ReadFile(filepath.Join(dir, ".git", "index"))
	require.NoError(t, err, what)
	var idx index.Index
	require.NoError(t, index.NewDecoder(bytes.NewReader(b)).Decode(&idx), "%s left an unreadable index", what)
}

// TestInitKilledAtItsHEADWrite kills Init at each atomicfile point of its
// HEAD write, after go-git wrote HEAD and the config: the next Init must
// give a repository that commits to main. (With go-git's default branch,
// master, such a kill left one committing to master.)
func TestInitKilledAtItsHEADWrite(t *testing.T) {
	for _, n := range failpoint.Names {
		if !strings.HasPrefix(n, "atomicfile.") {
			continue
		}
		t.Run(n, func(t *testing.T) {
			dir := t.TempDir()
			cmd := exec.Command(os.Args[0], "-test.run=^TestHelperCommitLoop$")
			cmd.Env = append(os.Environ(), crashDirEnv+"="+dir, failpoint.EnvVar+"="+n+"=kill@1")
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			require.ErrorAs(t, err, &ee, "%s", out)
			require.True(t, ee.Sys().(syscall.WaitStatus).Signaled(), "killed at %s: %s", n, out)
			require.FileExists(t, filepath.Join(dir, ".git", "config"), "go-git's Init ran before the kill")

			s, err := gitstore.Init(dir, nil)
			require.NoError(t, err)
			defer s.Close()
			require.NoError(t, os.WriteFile(filepath.Join(dir, "a.yaml"), []byte("a: 1\n"), 0o600))
			_, err = s.Commit("one")
			require.NoError(t, err)
			git(t, dir, "fsck", "--full", "--strict")
			assert.Equal(t, "main", strings.TrimSpace(git(t, dir, "branch", "--show-current")))
		})
	}
}

// TestObjectTempsAreInObjectsDir: a commit killed while writing its loose
// objects leaves their temporary files in objects/, never in a fan-out
// directory (which Open does not list), and Open removes them.
func TestObjectTempsAreInObjectsDir(t *testing.T) {
	dir := t.TempDir()
	// Rename 1 is Init's HEAD; 2 is the first commit's first object.
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperCommitLoop$")
	cmd.Env = append(os.Environ(), crashDirEnv+"="+dir, failpoint.EnvVar+"=atomicfile.before-rename=kill@2")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, "%s", out)
	require.True(t, ee.Sys().(syscall.WaitStatus).Signaled(), "%s", out)

	objects := filepath.Join(dir, ".git", "objects")
	var temps []string
	err = filepath.WalkDir(objects, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if gitstore.IsTemp(d.Name()) {
			assert.Equal(t, objects, filepath.Dir(p), "a temporary file in a fan-out directory: %s", p)
			temps = append(temps, p)
		}
		return nil
	})
	require.NoError(t, err)
	require.NotEmpty(t, temps, "the kill left the objects' temporary files")

	s, err := gitstore.Open(dir, &gitstore.Options{HoldsLock: true})
	require.NoError(t, err)
	defer s.Close()
	assert.Len(t, s.Repairs(), len(temps))
	for _, p := range temps {
		assert.NoFileExists(t, p)
	}
}
